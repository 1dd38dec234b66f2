package core

// Permission actions.
const (
	ActionAllow = "allow"
	ActionDeny  = "deny"
	ActionAsk   = "ask"
)

// Replies to a permission request.
const (
	ReplyOnce   = "once"
	ReplyAlways = "always"
	ReplyReject = "reject"
)

// Rule is one permission rule: for a permission key and a pattern, what to
// do. Later rules override earlier ones.
type Rule struct {
	Permission string `json:"permission"`
	Pattern    string `json:"pattern"`
	Action     string `json:"action"`
}

// PermissionToolRef ties a request to the tool call that needs it.
type PermissionToolRef struct {
	MessageID string `json:"messageID"`
	CallID    string `json:"callID"`
}

// PermissionRequest is a durable question to the user, in opencode's
// shape, plus agentd's bookkeeping fields.
type PermissionRequest struct {
	ID         string             `json:"id"`
	SessionID  string             `json:"sessionID"`
	Permission string             `json:"permission"`
	Patterns   []string           `json:"patterns"`
	Metadata   map[string]any     `json:"metadata"`
	Always     []string           `json:"always"`
	Tool       *PermissionToolRef `json:"tool,omitempty"`
	RunID      string             `json:"runID"`
	PartID     string             `json:"partID,omitempty"`
	Title      string             `json:"title,omitempty"`
	// Reply is empty while the request is pending.
	Reply   string `json:"reply,omitempty"`
	Message string `json:"message,omitempty"`
	// By says who answered when no person did: "timeout" (nobody
	// answered in time) or "rules" (the run was not interactive); see
	// package asks.
	By   string `json:"by,omitempty"`
	Time struct {
		Created int64 `json:"created"`
		Replied int64 `json:"replied,omitempty"`
	} `json:"time"`
}

// OpencodePermission is a permission request exactly as opencode's schema
// has it: the question without agentd's bookkeeping.
type OpencodePermission struct {
	ID         string             `json:"id"`
	SessionID  string             `json:"sessionID"`
	Permission string             `json:"permission"`
	Patterns   []string           `json:"patterns"`
	Metadata   map[string]any     `json:"metadata"`
	Always     []string           `json:"always"`
	Tool       *PermissionToolRef `json:"tool,omitempty"`
}

// Opencode narrows p to opencode's shape.
func (p PermissionRequest) Opencode() OpencodePermission {
	o := OpencodePermission{ID: p.ID, SessionID: p.SessionID, Permission: p.Permission,
		Patterns: p.Patterns, Metadata: p.Metadata, Always: p.Always, Tool: p.Tool}
	if o.Patterns == nil {
		o.Patterns = []string{}
	}
	if o.Always == nil {
		o.Always = []string{}
	}
	if o.Metadata == nil {
		o.Metadata = map[string]any{}
	}
	return o
}

// PermissionRepliedProps is the payload of permission.replied.
type PermissionRepliedProps struct {
	SessionID string `json:"sessionID"`
	RequestID string `json:"requestID"`
	Reply     string `json:"reply"`
}
