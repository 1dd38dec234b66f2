package core

import "encoding/json"

// Part types. PartIdle is agentd's own: it closes a run in the transcript.
const (
	PartText       = "text"
	PartReasoning  = "reasoning"
	PartTool       = "tool"
	PartStepStart  = "step-start"
	PartStepFinish = "step-finish"
	PartFile       = "file"
	PartIdle       = "idle"
)

// Tool part states.
const (
	ToolPending   = "pending"
	ToolRunning   = "running"
	ToolCompleted = "completed"
	ToolError     = "error"
)

// PartTime is the start and end of a streamed or executed part, in epoch ms.
type PartTime struct {
	Start int64 `json:"start"`
	End   int64 `json:"end,omitempty"`
}

// ToolState is the lifecycle of one tool call, in opencode's shape.
type ToolState struct {
	Status   string          `json:"status"`
	Input    json.RawMessage `json:"input"`
	Raw      string          `json:"raw,omitempty"`
	Output   string          `json:"output,omitempty"`
	Title    string          `json:"title,omitempty"`
	Error    string          `json:"error,omitempty"`
	Metadata map[string]any  `json:"metadata,omitempty"`
	Time     PartTime        `json:"time"`
}

// MarshalJSON encodes the state with exactly the fields its status has.
func (s ToolState) MarshalJSON() ([]byte, error) {
	input := s.Input
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	switch s.Status {
	case ToolPending:
		return json.Marshal(struct {
			Status string          `json:"status"`
			Input  json.RawMessage `json:"input"`
			Raw    string          `json:"raw"`
		}{s.Status, input, s.Raw})
	case ToolRunning:
		return json.Marshal(struct {
			Status   string          `json:"status"`
			Input    json.RawMessage `json:"input"`
			Title    string          `json:"title,omitempty"`
			Metadata map[string]any  `json:"metadata,omitempty"`
			Time     struct {
				Start int64 `json:"start"`
			} `json:"time"`
		}{Status: s.Status, Input: input, Title: s.Title, Metadata: s.Metadata, Time: struct {
			Start int64 `json:"start"`
		}{s.Time.Start}})
	case ToolCompleted:
		md := s.Metadata
		if md == nil {
			md = map[string]any{}
		}
		return json.Marshal(struct {
			Status   string          `json:"status"`
			Input    json.RawMessage `json:"input"`
			Output   string          `json:"output"`
			Title    string          `json:"title"`
			Metadata map[string]any  `json:"metadata"`
			Time     PartTime        `json:"time"`
		}{s.Status, input, s.Output, s.Title, md, s.Time})
	default:
		return json.Marshal(struct {
			Status   string          `json:"status"`
			Input    json.RawMessage `json:"input"`
			Error    string          `json:"error"`
			Metadata map[string]any  `json:"metadata,omitempty"`
			Time     PartTime        `json:"time"`
		}{s.Status, input, s.Error, s.Metadata, s.Time})
	}
}

// Part is one piece of a message. Which fields are meaningful depends on
// Type; MarshalJSON writes exactly the fields of opencode's shape for that
// type (plus agentd's idle part).
type Part struct {
	ID        string
	SessionID string
	MessageID string
	Type      string

	// text, reasoning
	Text      string
	Synthetic bool
	Time      PartTime

	// tool
	CallID string
	Tool   string
	State  ToolState

	// step-finish
	Reason string
	Cost   float64
	Tokens Tokens

	// file
	Mime     string
	Filename string
	URL      string

	// idle
	RunID   string
	Outcome string
	Error   *Error

	Metadata map[string]any
}

// partWire is the union of every part field, used to decode.
type partWire struct {
	ID        string          `json:"id"`
	SessionID string          `json:"sessionID"`
	MessageID string          `json:"messageID"`
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Synthetic bool            `json:"synthetic"`
	Time      json.RawMessage `json:"time"`
	CallID    string          `json:"callID"`
	Tool      string          `json:"tool"`
	State     struct {
		ToolState
	} `json:"state"`
	Reason   string         `json:"reason"`
	Cost     float64        `json:"cost"`
	Tokens   Tokens         `json:"tokens"`
	Mime     string         `json:"mime"`
	Filename string         `json:"filename"`
	URL      string         `json:"url"`
	RunID    string         `json:"runID"`
	Outcome  string         `json:"outcome"`
	Error    *Error         `json:"error"`
	Metadata map[string]any `json:"metadata"`
}

// UnmarshalJSON decodes any part shape.
func (p *Part) UnmarshalJSON(b []byte) error {
	var w partWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*p = Part{ID: w.ID, SessionID: w.SessionID, MessageID: w.MessageID, Type: w.Type,
		Text: w.Text, Synthetic: w.Synthetic, CallID: w.CallID, Tool: w.Tool, State: w.State.ToolState,
		Reason: w.Reason, Cost: w.Cost, Tokens: w.Tokens, Mime: w.Mime, Filename: w.Filename, URL: w.URL,
		RunID: w.RunID, Outcome: w.Outcome, Error: w.Error, Metadata: w.Metadata}
	if len(w.Time) > 0 && w.Time[0] == '{' {
		var t struct {
			Start   int64 `json:"start"`
			End     int64 `json:"end"`
			Created int64 `json:"created"`
		}
		if err := json.Unmarshal(w.Time, &t); err != nil {
			return err
		}
		p.Time = PartTime{Start: t.Start, End: t.End}
		if p.Type == PartIdle {
			p.Time.Start = t.Created
		}
	}
	return nil
}

// UnmarshalJSON for ToolState avoids recursion through MarshalJSON's shapes.
func (s *ToolState) UnmarshalJSON(b []byte) error {
	type plain ToolState
	return json.Unmarshal(b, (*plain)(s))
}

// MarshalJSON encodes p in opencode's shape for its type.
func (p Part) MarshalJSON() ([]byte, error) {
	type head struct {
		ID        string `json:"id"`
		SessionID string `json:"sessionID"`
		MessageID string `json:"messageID"`
		Type      string `json:"type"`
	}
	h := head{p.ID, p.SessionID, p.MessageID, p.Type}
	switch p.Type {
	case PartText:
		var tm *PartTime
		if p.Time.Start != 0 {
			t := p.Time
			tm = &t
		}
		return json.Marshal(struct {
			head
			Text      string         `json:"text"`
			Synthetic bool           `json:"synthetic,omitempty"`
			Time      *PartTime      `json:"time,omitempty"`
			Metadata  map[string]any `json:"metadata,omitempty"`
		}{h, p.Text, p.Synthetic, tm, p.Metadata})
	case PartReasoning:
		return json.Marshal(struct {
			head
			Text     string         `json:"text"`
			Metadata map[string]any `json:"metadata,omitempty"`
			Time     PartTime       `json:"time"`
		}{h, p.Text, p.Metadata, p.Time})
	case PartTool:
		return json.Marshal(struct {
			head
			CallID   string         `json:"callID"`
			Tool     string         `json:"tool"`
			State    ToolState      `json:"state"`
			Metadata map[string]any `json:"metadata,omitempty"`
		}{h, p.CallID, p.Tool, p.State, p.Metadata})
	case PartStepStart:
		return json.Marshal(h)
	case PartStepFinish:
		return json.Marshal(struct {
			head
			Reason string  `json:"reason"`
			Cost   float64 `json:"cost"`
			Tokens Tokens  `json:"tokens"`
		}{h, p.Reason, p.Cost, p.Tokens})
	case PartFile:
		return json.Marshal(struct {
			head
			Mime     string `json:"mime"`
			Filename string `json:"filename,omitempty"`
			URL      string `json:"url"`
		}{h, p.Mime, p.Filename, p.URL})
	case PartIdle:
		return json.Marshal(struct {
			head
			RunID   string `json:"runID"`
			Outcome string `json:"outcome"`
			Reason  string `json:"reason,omitempty"`
			Error   *Error `json:"error,omitempty"`
			Time    struct {
				Created int64 `json:"created"`
			} `json:"time"`
		}{h, p.RunID, p.Outcome, p.Reason, p.Error, struct {
			Created int64 `json:"created"`
		}{p.Time.Start}})
	default:
		return json.Marshal(struct {
			head
			Metadata map[string]any `json:"metadata,omitempty"`
		}{h, p.Metadata})
	}
}
