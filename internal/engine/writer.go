package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// writer batches the writes of one transaction and remembers the first
// error, so transaction bodies read as a list of changes. Parts, messages
// and runs are encoded once, for their row and their event.
//
// A writer with rec set records instead of writing (see recording): it
// has no transaction, and what it is asked must not read one.
type writer struct {
	ctx context.Context
	tx  store.Tx
	err error
	rec *recording
}

// appendEvent adds an event to the transaction, or to the recording.
func (w *writer) appendEvent(ev core.Event) {
	if w.err != nil {
		return
	}
	if w.rec != nil {
		w.rec.events = append(w.rec.events, ev)
		return
	}
	w.err = w.tx.AppendEvent(w.ctx, ev)
}

func (w *writer) event(sessionID, typ string, props any) {
	if w.err != nil {
		return
	}
	ev, err := core.NewEvent(sessionID, typ, props)
	if err != nil {
		w.err = fmt.Errorf("encode %s: %w", typ, err)
		return
	}
	w.appendEvent(ev)
}

// encode is json.Marshal, its error kept as the writer's.
func (w *writer) encode(v any) []byte {
	if w.err != nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		w.err = fmt.Errorf("encode %T: %w", v, err)
	}
	return b
}

func (w *writer) part(p core.Part) {
	data := w.encode(p)
	if w.err != nil {
		return
	}
	if w.rec != nil {
		w.rec.put(p.ID, recorded{part: &p, data: data})
	} else {
		w.err = w.tx.PutPartJSON(w.ctx, p, data)
	}
	if w.err != nil {
		return
	}
	// message.part.updated's properties, around the row's own encoding.
	props := make([]byte, 0, len(data)+len(p.SessionID)+48)
	props = append(props, `{"sessionID":`...)
	props = appendJSONString(props, p.SessionID)
	props = append(props, `,"part":`...)
	props = append(props, data...)
	props = append(props, `,"time":`...)
	props = strconv.AppendInt(props, time.Now().UnixMilli(), 10)
	props = append(props, '}')
	w.appendEvent(core.Event{SessionID: p.SessionID, Type: core.EventPartUpdated, Properties: props})
}

// appendJSONString appends s as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always encodes
	return append(b, q...)
}

// todos replaces a session's todo list and says so with opencode's event.
func (w *writer) todos(sessionID string, todos []core.Todo) {
	if w.err != nil {
		return
	}
	if w.rec != nil {
		w.rec.ops = append(w.rec.ops, recorded{write: func(ctx context.Context, tx store.Tx) error { return tx.PutTodos(ctx, sessionID, todos) }})
	} else {
		w.err = w.tx.PutTodos(w.ctx, sessionID, todos)
	}
	if w.err == nil {
		w.event(sessionID, core.EventTodoUpdated, map[string]any{"sessionID": sessionID, "todos": todos})
	}
}

func (w *writer) message(m core.Message) {
	data := w.encode(m)
	if w.err != nil {
		return
	}
	if w.rec != nil {
		w.rec.put(m.ID, recorded{message: &m, data: data})
	} else {
		w.err = w.tx.PutMessageJSON(w.ctx, m, data)
	}
	w.messageEventJSON(m.SessionID, data)
}

// insertMessage inserts a new message.
func (w *writer) insertMessage(m core.Message) {
	data := w.encode(m)
	if w.err != nil {
		return
	}
	if w.rec != nil {
		w.rec.insert(recorded{inserted: &m})
	} else {
		w.err = w.tx.InsertMessage(w.ctx, m)
	}
	w.messageEventJSON(m.SessionID, data)
}

func (w *writer) messageEvent(m core.Message) {
	w.messageEventJSON(m.SessionID, w.encode(m))
}

// messageEventJSON appends message.updated around the message's encoding.
func (w *writer) messageEventJSON(sessionID string, data []byte) {
	if w.err != nil {
		return
	}
	props := make([]byte, 0, len(data)+len(sessionID)+32)
	props = append(props, `{"sessionID":`...)
	props = appendJSONString(props, sessionID)
	props = append(props, `,"info":`...)
	props = append(props, data...)
	props = append(props, '}')
	w.appendEvent(core.Event{SessionID: sessionID, Type: core.EventMessageUpdated, Properties: props})
}

func (w *writer) session(s core.Session) {
	if w.err != nil {
		return
	}
	if w.rec != nil {
		w.rec.ops = append(w.rec.ops, recorded{write: func(ctx context.Context, tx store.Tx) error { return tx.UpdateSession(ctx, s) }})
	} else {
		w.err = w.tx.UpdateSession(w.ctx, s)
	}
	if w.err == nil {
		w.event(s.ID, core.EventSessionUpdated, core.SessionProps{SessionID: s.ID, Info: s})
	}
}

func (w *writer) run(r core.Run) {
	data := w.encode(r)
	if w.err != nil {
		return
	}
	if w.rec != nil {
		w.rec.ops = append(w.rec.ops, recorded{run: &r, data: data})
	} else {
		w.err = w.tx.UpdateRunJSON(w.ctx, r, data)
	}
	w.runEventJSON(r.SessionID, data)
}

func (w *writer) runEvent(r core.Run) {
	w.runEventJSON(r.SessionID, w.encode(r))
}

// runEventJSON appends run.updated around the run's encoding.
func (w *writer) runEventJSON(sessionID string, data []byte) {
	if w.err != nil {
		return
	}
	props := make([]byte, 0, len(data)+8)
	props = append(props, `{"run":`...)
	props = append(props, data...)
	props = append(props, '}')
	w.appendEvent(core.Event{SessionID: sessionID, Type: core.EventRunUpdated, Properties: props})
}

// status publishes session.status in opencode's strict shape.
func (w *writer) status(sessionID string, st core.SessionStatus) {
	w.event(sessionID, core.EventSessionStatus, core.StatusEventProps{SessionID: sessionID, Status: st.Opencode()})
}
