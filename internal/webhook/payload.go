package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// Envelope is the JSON body of every delivery.
type Envelope struct {
	// ID is the delivery's id (also X-Agentd-Delivery): the same on
	// every attempt, so a receiver dedupes on it.
	ID string `json:"id"`
	// Type is the webhook event type (run.ended, ask.waiting).
	Type string `json:"type"`
	// Time is when the event happened (epoch ms); Seq its place in the
	// event log (GET /event?after=Seq-1 replays from it).
	Time      int64  `json:"time"`
	Seq       int64  `json:"seq"`
	SessionID string `json:"sessionID"`
	// Session describes the session, when it still existed at relay.
	Session *SessionInfo    `json:"session,omitempty"`
	Data    json.RawMessage `json:"data"`
}

// SessionInfo is what a delivery tells of its session.
type SessionInfo struct {
	ID        string `json:"id"`
	Title     string `json:"title"`
	Directory string `json:"directory"`
	ParentID  string `json:"parentID,omitempty"`
}

// RunEnded is run.ended's data: the run's outcome, the whole run as
// GET /session/{id}/run/{runID} answers it, and the text of its last
// answer.
type RunEnded struct {
	RunID    string         `json:"runID"`
	Outcome  core.RunState  `json:"outcome"`
	Reason   core.EndReason `json:"reason,omitempty"`
	Error    *core.Error    `json:"error,omitempty"`
	Run      core.Run       `json:"run"`
	Response *Response      `json:"response,omitempty"`
}

// Response is the text of a run's last assistant message, cut at
// MaxResponseBytes (Truncated then says so).
type Response struct {
	MessageID string `json:"messageID"`
	Text      string `json:"text"`
	Truncated bool   `json:"truncated,omitempty"`
}

// MaxResponseBytes bounds the answer's text a run.ended carries; the
// whole message is at GET /session/{id}/message/{messageID}.
const MaxResponseBytes = 64 << 10

// AskWaiting is ask.waiting's data: the request, as GET /permission or
// GET /question lists it, that the run waits on.
type AskWaiting struct {
	// Kind is "permission" or "question".
	Kind    string          `json:"kind"`
	RunID   string          `json:"runID"`
	Request json.RawMessage `json:"request"`
}

// item is one relevant event of the log with its webhook data, derived
// before the relay's transaction (reads outside the writer's serial
// section).
type item struct {
	ev      core.Event
	typ     string
	runID   string // run.ended's run, whose callbacks it goes to
	session *SessionInfo
	data    json.RawMessage
}

// derive returns the events of evs that webhooks report, with their data.
func (s *Service) derive(ctx context.Context, evs []core.Event) ([]item, error) {
	var out []item
	sessions := map[string]*SessionInfo{}
	for _, ev := range evs {
		it, ok, err := s.deriveOne(ctx, ev)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		info, seen := sessions[ev.SessionID]
		if !seen {
			if info, err = s.sessionInfo(ctx, ev.SessionID); err != nil {
				return nil, err
			}
			sessions[ev.SessionID] = info
		}
		it.session = info
		out = append(out, it)
	}
	return out, nil
}

func (s *Service) deriveOne(ctx context.Context, ev core.Event) (item, bool, error) {
	it := item{ev: ev}
	var err error
	switch ev.Type {
	case core.EventRunUpdated:
		var p core.RunProps
		if json.Unmarshal(ev.Properties, &p) != nil || !core.TerminalState(p.Run.State) {
			return it, false, nil
		}
		it.typ, it.runID = EventRunEnded, p.Run.ID
		it.data, err = s.runEnded(ctx, p.Run)
	case core.EventPermissionAsked, core.EventQuestionAsked:
		var p struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(ev.Properties, &p) != nil || p.ID == "" {
			return it, false, nil
		}
		it.typ = EventAskWaiting
		it.data, err = s.askWaiting(ctx, ev.Type, p.ID)
	default:
		return it, false, nil
	}
	if errors.Is(err, store.ErrNotFound) {
		// The session went before the relay read what it needed.
		return it, false, nil
	}
	return it, err == nil, err
}

func (s *Service) sessionInfo(ctx context.Context, id string) (*SessionInfo, error) {
	sess, err := s.st.Session(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &SessionInfo{ID: sess.ID, Title: sess.Title, Directory: sess.Directory, ParentID: sess.ParentID}, nil
}

func (s *Service) runEnded(ctx context.Context, run core.Run) (json.RawMessage, error) {
	d := RunEnded{RunID: run.ID, Outcome: run.State, Reason: run.Reason, Error: run.Error, Run: run}
	m, err := s.st.LastRunMessage(ctx, run.ID, core.RoleAssistant)
	switch {
	case err == nil:
		d.Response = responseOf(m)
	case !errors.Is(err, store.ErrNotFound):
		return nil, err
	}
	return json.Marshal(d)
}

// responseOf is the text a reader of the message sees: its text parts.
func responseOf(m core.MessageWithParts) *Response {
	var b strings.Builder
	for _, p := range m.Parts {
		if p.Type != core.PartText || p.Synthetic {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		b.WriteString(p.Text)
	}
	r := &Response{MessageID: m.Info.ID, Text: b.String()}
	if len(r.Text) > MaxResponseBytes {
		cut := MaxResponseBytes
		for cut > 0 && !utf8.RuneStart(r.Text[cut]) {
			cut--
		}
		r.Text, r.Truncated = r.Text[:cut], true
	}
	return r
}

func (s *Service) askWaiting(ctx context.Context, typ, id string) (json.RawMessage, error) {
	d := AskWaiting{Kind: "permission"}
	var req any
	if typ == core.EventQuestionAsked {
		q, err := s.st.Question(ctx, id)
		if err != nil {
			return nil, err
		}
		d.Kind, d.RunID, req = "question", q.RunID, q
	} else {
		p, err := s.st.Permission(ctx, id)
		if err != nil {
			return nil, err
		}
		d.RunID, req = p.RunID, p
	}
	var err error
	if d.Request, err = json.Marshal(req); err != nil {
		return nil, err
	}
	return json.Marshal(d)
}

// body is a delivery's envelope.
func (it item) body(id string) ([]byte, error) {
	return json.Marshal(Envelope{ID: id, Type: it.typ, Time: it.ev.Time, Seq: it.ev.Seq, SessionID: it.ev.SessionID,
		Session: it.session, Data: it.data})
}
