package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// writer batches the writes of one transaction and remembers the first
// error, so transaction bodies read as a list of changes.
type writer struct {
	ctx context.Context
	tx  store.Tx
	err error
	// rows, when set, defers the rows of parts and messages to flushRows,
	// which stores each once, with its last value (see rowBuffer).
	rows *rowBuffer
}

// rowBuffer holds the parts and messages of a runner's pending writes.
// Those writes are snapshots of a step as it went on, and one transaction
// often carries several of the same row: a step's message when it opened
// and when it ended, a tool call pending and then running. Each version
// still has its event, in order; the row is written once, with the last
// version, at the place of the first (which keeps the order in which
// parts and messages arrived, and a message ahead of its parts).
type rowBuffer struct {
	order []any // *core.Part or *core.Message
	index map[string]int
}

func (b *rowBuffer) put(id string, v any) {
	if i, ok := b.index[id]; ok {
		b.order[i] = v
		return
	}
	if b.index == nil {
		b.index = map[string]int{}
	}
	b.index[id] = len(b.order)
	b.order = append(b.order, v)
}

// flushRows stores the deferred rows and stops deferring.
func (w *writer) flushRows() {
	b := w.rows
	w.rows = nil
	if b == nil {
		return
	}
	for _, v := range b.order {
		if w.err != nil {
			return
		}
		switch v := v.(type) {
		case *core.Part:
			w.err = w.tx.PutPart(w.ctx, *v)
		case *core.Message:
			w.err = w.tx.PutMessage(w.ctx, *v)
		}
	}
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
	w.err = w.tx.AppendEvent(w.ctx, ev)
}

func (w *writer) part(p core.Part) {
	if w.err != nil {
		return
	}
	if w.rows != nil {
		w.rows.put(p.ID, &p)
	} else {
		w.err = w.tx.PutPart(w.ctx, p)
	}
	if w.err == nil {
		w.event(p.SessionID, core.EventPartUpdated, core.PartProps{SessionID: p.SessionID, Part: p, Time: time.Now().UnixMilli()})
	}
}

// todos replaces a session's todo list and says so with opencode's event.
func (w *writer) todos(sessionID string, todos []core.Todo) {
	if w.err != nil {
		return
	}
	if w.err = w.tx.PutTodos(w.ctx, sessionID, todos); w.err == nil {
		w.event(sessionID, core.EventTodoUpdated, map[string]any{"sessionID": sessionID, "todos": todos})
	}
}

func (w *writer) message(m core.Message) {
	if w.err != nil {
		return
	}
	if w.rows != nil {
		w.rows.put(m.ID, &m)
	} else {
		w.err = w.tx.PutMessage(w.ctx, m)
	}
	if w.err == nil {
		w.messageEvent(m)
	}
}

// insertMessage inserts a new message. The rows deferred so far go first:
// a message's place is fixed when it is inserted, and those came before.
func (w *writer) insertMessage(m core.Message) {
	if w.rows != nil {
		w.flushRows()
		w.rows = &rowBuffer{}
	}
	if w.err != nil {
		return
	}
	if w.err = w.tx.InsertMessage(w.ctx, m); w.err == nil {
		w.messageEvent(m)
	}
}

func (w *writer) messageEvent(m core.Message) {
	w.event(m.SessionID, core.EventMessageUpdated, core.MessageProps{SessionID: m.SessionID, Info: m})
}

func (w *writer) session(s core.Session) {
	if w.err != nil {
		return
	}
	if w.err = w.tx.UpdateSession(w.ctx, s); w.err == nil {
		w.event(s.ID, core.EventSessionUpdated, core.SessionProps{SessionID: s.ID, Info: s})
	}
}

func (w *writer) run(r core.Run) {
	if w.err != nil {
		return
	}
	if w.err = w.tx.UpdateRun(w.ctx, r); w.err == nil {
		w.runEvent(r)
	}
}

func (w *writer) runEvent(r core.Run) {
	w.event(r.SessionID, core.EventRunUpdated, core.RunProps{Run: r})
}

// status publishes session.status in opencode's strict shape.
func (w *writer) status(sessionID string, st core.SessionStatus) {
	w.event(sessionID, core.EventSessionStatus, core.StatusEventProps{SessionID: sessionID, Status: st.Opencode()})
}
