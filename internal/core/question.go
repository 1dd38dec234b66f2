package core

// QuestionOption is one choice offered with a question.
type QuestionOption struct {
	Label       string `json:"label"`
	Description string `json:"description"`
}

// QuestionInfo is one question the model asks the user, in opencode's
// shape.
type QuestionInfo struct {
	Question string           `json:"question"`
	Header   string           `json:"header"`
	Options  []QuestionOption `json:"options"`
	Multiple bool             `json:"multiple,omitempty"`
	Custom   *bool            `json:"custom,omitempty"`
}

// QuestionRequest is a durable question to the user (the question tool's),
// in opencode's shape plus agentd's bookkeeping: the run and part that
// asked, and the answer once there is one.
type QuestionRequest struct {
	ID        string             `json:"id"`
	SessionID string             `json:"sessionID"`
	Questions []QuestionInfo     `json:"questions"`
	Tool      *PermissionToolRef `json:"tool,omitempty"`
	RunID     string             `json:"runID"`
	PartID    string             `json:"partID,omitempty"`
	// Answers holds, per question, the labels chosen (or written); nil
	// while the request is pending. Rejected is set when the user
	// dismissed it instead.
	Answers  [][]string `json:"answers,omitempty"`
	Rejected bool       `json:"rejected,omitempty"`
	// By says who dismissed it when no person did (see
	// PermissionRequest.By).
	By   string `json:"by,omitempty"`
	Time struct {
		Created int64 `json:"created"`
		Replied int64 `json:"replied,omitempty"`
	} `json:"time"`
}

// Pending reports whether the request awaits an answer.
func (q QuestionRequest) Pending() bool { return q.Answers == nil && !q.Rejected }

// OpencodeQuestion is a question request exactly as opencode's schema has
// it.
type OpencodeQuestion struct {
	ID        string             `json:"id"`
	SessionID string             `json:"sessionID"`
	Questions []QuestionInfo     `json:"questions"`
	Tool      *PermissionToolRef `json:"tool,omitempty"`
}

// Opencode narrows q to opencode's shape.
func (q QuestionRequest) Opencode() OpencodeQuestion {
	o := OpencodeQuestion{ID: q.ID, SessionID: q.SessionID, Questions: q.Questions, Tool: q.Tool}
	if o.Questions == nil {
		o.Questions = []QuestionInfo{}
	}
	return o
}

// Question event types.
const (
	EventQuestionAsked    = "question.asked"
	EventQuestionReplied  = "question.replied"
	EventQuestionRejected = "question.rejected"
)

// PrefixQuestion starts a question request's id.
const PrefixQuestion = "que"

// PhaseWaitingQuestion refines a busy status whose run waits for the
// user's answer to a question.
const PhaseWaitingQuestion Phase = "waiting_question"
