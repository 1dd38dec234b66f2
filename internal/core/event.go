package core

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// Event types agentd emits. Most are opencode's, with exactly the
// properties opencode's OpenAPI document allows; server.gap, run.updated,
// revert.updated and session.forked are agentd's own (opencode clients
// ignore types they do not know).
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
	EventSessionCompacted  = "session.compacted"
	EventMessageUpdated    = "message.updated"
	EventMessageRemoved    = "message.removed"
	EventPartUpdated       = "message.part.updated"
	EventPartRemoved       = "message.part.removed"
	EventPartDelta         = "message.part.delta"
	EventPermissionAsked   = "permission.asked"
	EventPermissionReplied = "permission.replied"
	EventRunUpdated        = "run.updated"
	EventSessionDiff       = "session.diff"
	// EventRevertUpdated is agentd's: a revert or unrevert of a session's
	// files started, finished, was rolled back or failed (package undo).
	EventRevertUpdated = "revert.updated"
	// EventSessionForked is agentd's: the last event of a fork's
	// transaction, after the copies of its messages. A stream opened
	// without a cursor does not reach back past it (events.Hub.Recent):
	// the copies are history, not the new output of a client that forked
	// and then subscribed.
	EventSessionForked = "session.forked"
)

// ForkedProps are session.forked's properties: the fork, the session it
// was copied from, and how many messages it holds.
type ForkedProps struct {
	SessionID string `json:"sessionID"`
	From      string `json:"from"`
	Messages  int    `json:"messages"`
}

// ChangesState reports whether an event of this type accompanies a change
// of what a session's status is derived from: its runs, its pending
// permissions, its existence. Every such change publishes one of these
// types, so a waiter on a session's state need not look at the others.
func ChangesState(typ string) bool {
	switch typ {
	case EventRunUpdated, EventPermissionAsked, EventPermissionReplied, EventSessionDeleted, EventSessionStatus:
		return true
	}
	return false
}

// Event is one record of the event log. Durable events have Seq > 0 and
// are replayable; live-only events (deltas, heartbeats) have Seq 0. The
// seq travels outside the JSON object (the SSE id line), because opencode's
// schema wants the JSON id to be an evt_ identifier.
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

// SeqID is the string form of a durable sequence number, used as the SSE
// id line.
func SeqID(seq int64) string { return strconv.FormatInt(seq, 10) }

// DurableEventID is the JSON id of the durable event with the given seq:
// an evt_ identifier, as opencode's schema requires, that is the same on
// every replay.
func DurableEventID(seq int64) string { return fmt.Sprintf("%s_%026x", PrefixEvent, seq) }

// SessionProps is the payload of session.created, session.updated and
// session.deleted.
type SessionProps struct {
	SessionID string  `json:"sessionID"`
	Info      Session `json:"info"`
}

// MessageProps is the payload of message.updated.
type MessageProps struct {
	SessionID string  `json:"sessionID"`
	Info      Message `json:"info"`
}

// PartProps is the payload of message.part.updated; Time is when the part
// changed, in epoch ms.
type PartProps struct {
	SessionID string `json:"sessionID"`
	Part      Part   `json:"part"`
	Time      int64  `json:"time"`
}

// DeltaProps is the payload of the live-only message.part.delta.
type DeltaProps struct {
	SessionID string `json:"sessionID"`
	MessageID string `json:"messageID"`
	PartID    string `json:"partID"`
	Field     string `json:"field"`
	Delta     string `json:"delta"`
}

// StatusEventProps is the payload of session.status, in opencode's strict
// shape. agentd's richer status (run id, phase, last outcome) is on its
// own routes and in run.updated.
type StatusEventProps struct {
	SessionID string         `json:"sessionID"`
	Status    OpencodeStatus `json:"status"`
}

// IdleEventProps is the payload of session.idle. opencode's schema allows
// nothing but the session id; the outcome of the run that ended is in the
// run.updated event written just before, in the same transaction.
type IdleEventProps struct {
	SessionID string `json:"sessionID"`
}

// ErrorEventProps is the payload of session.error, published when a run
// fails.
type ErrorEventProps struct {
	SessionID string `json:"sessionID"`
	Error     *Error `json:"error"`
}

// CompactedProps is the payload of session.compacted.
type CompactedProps struct {
	SessionID string `json:"sessionID"`
}

// RunProps is the payload of agentd's run.updated: the whole run row.
type RunProps struct {
	Run Run `json:"run"`
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

// JSONSchema describes what MarshalJSON writes (for the API document).
func (ErrorData) JSONSchema() map[string]any {
	return map[string]any{"type": "object", "required": []string{"message"},
		"properties": map[string]any{"message": map[string]any{"type": "string"}}}
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

// Names of opencode's message error union. Messages and session.error
// carry only these; agentd tells its own kinds of failure apart with the
// ref of an UnknownError.
const (
	ErrNameAborted      = "MessageAbortedError"
	ErrNameUnknown      = "UnknownError"
	ErrNameAPI          = "APIError"
	ErrNameProviderAuth = "ProviderAuthError"
)

// Refs of agentd's kinds of UnknownError.
const (
	RefStreamRetried = "stream_retried"
	RefMaxSteps      = "max_steps"
	RefModelNotFound = "model_not_found"
	RefCrashLoop     = "crash_loop"
	RefInternal      = "internal"
	RefBudget        = "budget_exceeded"
)

// AbortedError is opencode's MessageAbortedError.
func AbortedError(msg string) *Error { return NewError(ErrNameAborted, msg) }

// UnknownError is opencode's UnknownError with agentd's kind in ref.
func UnknownError(ref, msg string) *Error {
	return &Error{Name: ErrNameUnknown, Data: ErrorData{Message: msg, Extra: map[string]any{"ref": ref}}}
}

// Ref returns the ref of an UnknownError ("" for other errors).
func (e *Error) Ref() string {
	if e == nil || e.Name != ErrNameUnknown {
		return ""
	}
	ref, _ := e.Data.Extra["ref"].(string)
	return ref
}

// legacyRefs maps error names that agentd wrote before it kept to
// opencode's union onto the refs that replace them, so that old databases
// still produce valid messages.
var legacyRefs = map[string]string{
	"StreamRetriedError":         RefStreamRetried,
	"MaxStepsError":              RefMaxSteps,
	"ProviderModelNotFoundError": RefModelNotFound,
}

// UnmarshalJSON decodes an error, normalising legacy names.
func (e *Error) UnmarshalJSON(b []byte) error {
	type plain Error
	if err := json.Unmarshal(b, (*plain)(e)); err != nil {
		return err
	}
	if ref, ok := legacyRefs[e.Name]; ok {
		*e = *UnknownError(ref, e.Data.Message)
	} else if e.Name == "MessageInterruptedError" {
		e.Name = ErrNameAborted
	}
	return nil
}

// Error implements error so that an *Error can travel through Go code.
func (e *Error) Error() string { return e.Name + ": " + e.Data.Message }
