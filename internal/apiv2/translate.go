package apiv2

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/events"
)

// The event log in opencode 2's shapes. Every stream reads the one
// durable log (its seq is the SSE id of every stream, v1's and these);
// a translator turns each event into opencode 2's events:
//
//   - the instance stream (/api/event) sends opencode's v1 events in
//     opencode 2's envelope ({id, type, data}, which 1.18.33's V2Event
//     union lists) and the session events derived from them;
//   - the session stream (/api/session/{id}/event) and history send only
//     the durable session events (1.18.33's session.next.* and the later
//     schema's session.execution.*).
//
// One event may become several (a text's start and end); the seq goes on
// the last one's SSE id and durable block, so that a client cut off in
// between resumes before the event rather than after it. A translator
// keeps a little state per stream (which parts it announced, the agent
// and model of each step) and reads the store for what an event does not
// carry (a prompt's text, the message a restart cut off).

// dialect says which of opencode 2's streams a translator writes.
type dialect int

const (
	instanceStream dialect = iota
	sessionStream
)

// v2Event is opencode 2's event envelope.
type v2Event struct {
	ID      string      `json:"id"`
	Type    string      `json:"type"`
	Durable *durableRef `json:"durable,omitempty"`
	Data    any         `json:"data"`
}

// durableRef places a durable event in the log: its session (the
// aggregate) and its seq, the log's (gaps between a session's events are
// other sessions').
type durableRef struct {
	AggregateID string `json:"aggregateID"`
	Seq         int64  `json:"seq"`
	Version     int    `json:"version"`
}

// derived is one opencode 2 event a log event becomes.
type derived struct {
	typ  string
	data any
}

type translator struct {
	a   *API
	ctx context.Context
	d   dialect

	// What this stream has announced, and the assistant messages' agent
	// and model; bounded (cleared when full).
	started, called, failed, prompted seen
	kinds                             map[string]core.PartType
	steps                             map[string]stepInfo
	// removed is, per session, the first message a retire removed, until
	// the session.updated that clears its revert point (a commit);
	// reverts the session's revert point as last seen.
	removed, reverts map[string]string
}

type stepInfo struct {
	agent string
	model modelRef
	user  bool
}

// seen is a bounded set of ids.
type seen map[string]bool

const seenMax = 4096

func (s *seen) add(id string) bool {
	if *s == nil || len(*s) >= seenMax {
		*s = seen{}
	}
	if (*s)[id] {
		return false
	}
	(*s)[id] = true
	return true
}

func (a *API) translator(ctx context.Context, d dialect) *translator {
	return &translator{a: a, ctx: ctx, d: d, kinds: map[string]core.PartType{}, steps: map[string]stepInfo{}, removed: map[string]string{},
		reverts: map[string]string{}}
}

// v1Types are opencode's v1 event types, which the instance stream passes
// on in opencode 2's envelope.
var v1Types = map[string]bool{
	core.EventSessionCreated: true, core.EventSessionUpdated: true, core.EventSessionDeleted: true,
	core.EventMessageUpdated: true, core.EventMessageRemoved: true, core.EventPartUpdated: true, core.EventPartRemoved: true,
	core.EventPartDelta: true, core.EventSessionDiff: true, core.EventSessionError: true, core.EventSessionStatus: true,
	core.EventSessionIdle: true, core.EventSessionCompacted: true, core.EventPermissionAsked: true, core.EventPermissionReplied: true,
	core.EventQuestionAsked: true, core.EventQuestionReplied: true, core.EventQuestionRejected: true, "todo.updated": true,
	core.EventServerConnected: true,
	// The terminals' events (package pty), which opencode 2's union lists
	// with the same data.
	"pty.created": true, "pty.updated": true, "pty.exited": true, "pty.deleted": true,
}

// frames is Translate for events.StreamOptions.
func (t *translator) frames(ev core.Event) []events.Frame {
	switch ev.Type {
	case core.EventServerHeartbeat:
		return []events.Frame{{Comment: "heartbeat"}}
	case core.EventServerConnected:
		if t.d == sessionStream {
			return []events.Frame{{Comment: "connected"}}
		}
	}
	list := t.events(ev)
	out := make([]events.Frame, len(list))
	for i, e := range list {
		out[i] = events.Frame{Data: e}
		if t.d == sessionStream {
			out[i].Event = e.Type
		}
	}
	return out
}

// events is what one log event becomes in this dialect.
func (t *translator) events(ev core.Event) []v2Event {
	if t.d == sessionStream && ev.Seq == 0 && ev.Type != core.EventServerGap {
		return nil // the session stream is durable events only
	}
	var list []derived
	if ev.Type == core.EventServerGap {
		list = []derived{{ev.Type, ev.Properties}}
	} else if t.d == instanceStream && v1Types[ev.Type] {
		list = []derived{{ev.Type, json.RawMessage(ev.Properties)}}
	}
	list = append(list, t.derive(ev)...)
	out := make([]v2Event, len(list))
	base := ev.ID
	if ev.Seq > 0 {
		base = core.DurableEventID(ev.Seq)
	}
	for i, d := range list {
		out[i] = v2Event{ID: base, Type: d.typ, Data: d.data}
		if i > 0 {
			out[i].ID = base + "." + strconv.Itoa(i)
		}
	}
	if ev.Seq > 0 && ev.Type != core.EventServerGap && len(out) > 0 {
		out[len(out)-1].Durable = &durableRef{AggregateID: ev.SessionID, Seq: ev.Seq, Version: 1}
	}
	return out
}

// derive is the session events a log event becomes.
func (t *translator) derive(ev core.Event) []derived {
	switch ev.Type {
	case core.EventMessageUpdated:
		return t.messageUpdated(ev)
	case core.EventPartUpdated:
		return t.partUpdated(ev)
	case core.EventPartDelta:
		return t.delta(ev)
	case core.EventRunUpdated:
		return t.runUpdated(ev)
	case core.EventSessionCompacted:
		return t.compacted(ev)
	case core.EventMessageRemoved, core.EventPartRemoved:
		var p struct {
			MessageID string `json:"messageID"`
		}
		if json.Unmarshal(ev.Properties, &p) == nil && t.removed[ev.SessionID] == "" {
			t.removed[ev.SessionID] = p.MessageID
		}
	case core.EventSessionUpdated:
		return t.sessionUpdated(ev)
	}
	if t.d == instanceStream {
		return t.asks(ev)
	}
	return nil
}

// stamp is the time of an event, for the data of 1.18.33's session
// events.
func stamp(ev core.Event) int64 {
	if ev.Time > 0 {
		return ev.Time
	}
	return time.Now().UnixMilli()
}

// base is the data every session.next.* event carries.
func base(ev core.Event) map[string]any {
	return map[string]any{"timestamp": stamp(ev), "sessionID": ev.SessionID}
}

func with(m map[string]any, kv ...any) map[string]any {
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

// asks renames the permission and question events (instance stream):
// opencode 2's own types beside v1's.
func (t *translator) asks(ev core.Event) []derived {
	switch ev.Type {
	case core.EventPermissionAsked:
		var p core.PermissionRequest
		if json.Unmarshal(ev.Properties, &p) != nil {
			return nil
		}
		return []derived{{"permission.v2.asked", permissionOf(p)}}
	case core.EventPermissionReplied:
		return []derived{{"permission.v2.replied", json.RawMessage(ev.Properties)}}
	case core.EventQuestionAsked:
		return []derived{{"question.v2.asked", json.RawMessage(ev.Properties)}}
	case core.EventQuestionReplied:
		return []derived{{"question.v2.replied", json.RawMessage(ev.Properties)}}
	case core.EventQuestionRejected:
		return []derived{{"question.v2.rejected", json.RawMessage(ev.Properties)}}
	}
	return nil
}
