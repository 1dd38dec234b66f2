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
	if w.err = w.tx.PutPart(w.ctx, p); w.err == nil {
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
	if w.err = w.tx.PutMessage(w.ctx, m); w.err == nil {
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
