package core

import (
	"encoding/json"
	"strconv"
)

// Event types agentd emits. Most are opencode's; server.gap and run.updated
// are agentd's own.
const (
	EventServerConnected   = "server.connected"
	EventServerHeartbeat   = "server.heartbeat"
	EventServerGap         = "server.gap"
	EventSessionCreated    = "session.created"
	EventSessionUpdated    = "session.updated"
	EventSessionDeleted    = "session.deleted"
	EventSessionStatus     = "session.status"
	EventSessionIdle       = "session.idle"
	EventSessionError      = "session.error"
	EventMessageUpdated    = "message.updated"
	EventMessageRemoved    = "message.removed"
	EventPartUpdated       = "message.part.updated"
	EventPartRemoved       = "message.part.removed"
	EventPartDelta         = "message.part.delta"
	EventPermissionAsked   = "permission.asked"
	EventPermissionReplied = "permission.replied"
	EventRunUpdated        = "run.updated"
)

// Event is one record of the event log. Durable events have Seq > 0 and
// are replayable; live-only events (deltas, heartbeats) have Seq 0.
type Event struct {
	Seq        int64           `json:"-"`
	ID         string          `json:"id"`
	Type       string          `json:"type"`
	Properties json.RawMessage `json:"properties"`
	SessionID  string          `json:"-"`
	Time       int64           `json:"-"`
}

// NewEvent builds an event with its properties encoded. The id is filled in
// when the event is stored (durable) or sent (live).
func NewEvent(sessionID, typ string, props any) (Event, error) {
	b, err := json.Marshal(props)
	if err != nil {
		return Event{}, err
	}
	return Event{Type: typ, Properties: b, SessionID: sessionID}, nil
}

// MustEvent is NewEvent for properties that always encode, such as the
// structs built in this module.
func MustEvent(sessionID, typ string, props any) Event {
	ev, err := NewEvent(sessionID, typ, props)
	if err != nil {
		panic("core: encode event " + typ + ": " + err.Error())
	}
	return ev
}

// SeqID is the string form of a durable sequence number, used as the
// event's id and as the SSE id line.
func SeqID(seq int64) string { return strconv.FormatInt(seq, 10) }

// StatusEventProps is the payload of session.status.
type StatusEventProps struct {
	SessionID string        `json:"sessionID"`
	Status    SessionStatus `json:"status"`
}

// IdleEventProps is the payload of session.idle, extended with the outcome
// of the run that ended.
type IdleEventProps struct {
	SessionID string `json:"sessionID"`
	RunID     string `json:"runID"`
	Outcome   string `json:"outcome"`
	Reason    string `json:"reason,omitempty"`
	Error     *Error `json:"error,omitempty"`
}

// Error is opencode's error object: a name and a data bag that always has a
// message.
type Error struct {
	Name string    `json:"name"`
	Data ErrorData `json:"data"`
}

// ErrorData is the data of an Error. Extra carries provider-specific fields
// such as statusCode or responseBody.
type ErrorData struct {
	Message string
	Extra   map[string]any
}

// MarshalJSON flattens Extra next to message.
func (d ErrorData) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(d.Extra)+1)
	for k, v := range d.Extra {
		m[k] = v
	}
	m["message"] = d.Message
	return json.Marshal(m)
}

// UnmarshalJSON reads message and keeps every other field in Extra.
func (d *ErrorData) UnmarshalJSON(b []byte) error {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	if s, ok := m["message"].(string); ok {
		d.Message = s
	}
	delete(m, "message")
	if len(m) > 0 {
		d.Extra = m
	} else {
		d.Extra = nil
	}
	return nil
}

// NewError builds an Error with a name and a message.
func NewError(name, msg string) *Error {
	return &Error{Name: name, Data: ErrorData{Message: msg}}
}

// Error implements error so that an *Error can travel through Go code.
func (e *Error) Error() string { return e.Name + ": " + e.Data.Message }
