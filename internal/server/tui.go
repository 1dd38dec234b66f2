package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/tuictl"
)

// opencode's TUI routes: how an editor (or a plugin) drives a TUI attached
// to this server. Each request is published as a live event on /event and
// /global/event (tui.prompt.append, tui.command.execute, tui.toast.show,
// tui.session.select), which opencode's TUI follows and acts on, and is
// queued for a client that polls GET /tui/control/next instead. The
// events are live-only: a TUI that reconnects must not append a prompt or
// show a toast a second time. On several nodes a request reaches the TUIs
// attached to the node that received it.

// TUI event types, opencode's.
const (
	eventTUIPromptAppend  = "tui.prompt.append"
	eventTUICommand       = "tui.command.execute"
	eventTUIToast         = "tui.toast.show"
	eventTUISessionSelect = "tui.session.select"
)

// tuiCommandAliases are the legacy command names opencode's
// execute-command route translates to the TUI's own; other names are
// passed on as they are (a TUI command such as "session.new").
var tuiCommandAliases = map[string]string{
	"session_new": "session.new", "session_share": "session.share", "session_interrupt": "session.interrupt",
	"session_compact": "session.compact", "messages_page_up": "session.page.up", "messages_page_down": "session.page.down",
	"messages_line_up": "session.line.up", "messages_line_down": "session.line.down",
	"messages_half_page_up": "session.half.page.up", "messages_half_page_down": "session.half.page.down",
	"messages_first": "session.first", "messages_last": "session.last", "agent_cycle": "agent.cycle",
}

type tuiPromptBody struct {
	Text *string `json:"text"`
}

type tuiCommandBody struct {
	Command string `json:"command"`
}

type tuiToastBody struct {
	Title    string  `json:"title,omitempty"`
	Message  *string `json:"message"`
	Variant  string  `json:"variant"`
	Duration *int    `json:"duration,omitempty"`
}

type tuiSelectBody struct {
	SessionID string `json:"sessionID"`
}

// tuiPublishBody is POST /tui/publish: one of the four TUI events.
type tuiPublishBody struct {
	Type       string          `json:"type"`
	Properties json.RawMessage `json:"properties"`
}

// tuiRequestJSON documents GET /tui/control/next.
type tuiRequestJSON struct {
	Path string `json:"path"`
	Body any    `json:"body"`
}

func (b tuiToastBody) check() *apiError {
	if b.Message == nil {
		return badRequest("message is required")
	}
	switch b.Variant {
	case "info", "success", "warning", "error":
	default:
		return badRequest("variant %q: want info, success, warning or error", b.Variant)
	}
	if b.Duration != nil && *b.Duration <= 0 {
		return badRequest("duration %d: want a positive number of milliseconds", *b.Duration)
	}
	return nil
}

// tuiSend publishes a TUI event and queues the request for pollers.
func (s *Server) tuiSend(r *http.Request, typ string, props any) {
	s.hub.PublishLive(core.MustEvent("", typ, props))
	if body, err := json.Marshal(props); err == nil {
		s.tui.Push(tuictl.Request{Path: r.URL.Path, Body: body})
	}
}

// tuiCommand answers the routes that run one TUI command.
func (s *Server) tuiCommand(command string) func(w http.ResponseWriter, r *http.Request) *apiError {
	return func(w http.ResponseWriter, r *http.Request) *apiError {
		s.tuiSend(r, eventTUICommand, map[string]string{"command": command})
		writeJSON(w, http.StatusOK, true)
		return nil
	}
}

func (s *Server) tuiAppendPrompt(w http.ResponseWriter, r *http.Request) *apiError {
	var b tuiPromptBody
	if e := decodeJSON(r, &b, false); e != nil {
		return e
	}
	if b.Text == nil {
		return badRequest("text is required")
	}
	s.tuiSend(r, eventTUIPromptAppend, map[string]string{"text": *b.Text})
	writeJSON(w, http.StatusOK, true)
	return nil
}

func (s *Server) tuiExecuteCommand(w http.ResponseWriter, r *http.Request) *apiError {
	var b tuiCommandBody
	if e := decodeJSON(r, &b, false); e != nil {
		return e
	}
	cmd := strings.TrimSpace(b.Command)
	if cmd == "" {
		return badRequest("command is required")
	}
	if alias, ok := tuiCommandAliases[cmd]; ok {
		cmd = alias
	}
	s.tuiSend(r, eventTUICommand, map[string]string{"command": cmd})
	writeJSON(w, http.StatusOK, true)
	return nil
}

func (s *Server) tuiShowToast(w http.ResponseWriter, r *http.Request) *apiError {
	var b tuiToastBody
	if e := decodeJSON(r, &b, false); e != nil {
		return e
	}
	if e := b.check(); e != nil {
		return e
	}
	s.tuiSend(r, eventTUIToast, b)
	writeJSON(w, http.StatusOK, true)
	return nil
}

func (s *Server) tuiSelectSession(w http.ResponseWriter, r *http.Request) *apiError {
	var b tuiSelectBody
	if e := decodeJSON(r, &b, false); e != nil {
		return e
	}
	if e := s.tuiSelectCheck(r.Context(), b); e != nil {
		return e
	}
	s.tuiSend(r, eventTUISessionSelect, b)
	writeJSON(w, http.StatusOK, true)
	return nil
}

// tuiSelectCheck refuses a selection of a session that is not one.
func (s *Server) tuiSelectCheck(ctx context.Context, b tuiSelectBody) *apiError {
	if !strings.HasPrefix(b.SessionID, core.PrefixSession) {
		return badRequest("sessionID %q is not a session id", b.SessionID)
	}
	if _, err := s.st.Session(ctx, b.SessionID); err != nil {
		return s.storeErr(err, "session "+b.SessionID)
	}
	return nil
}

// tuiPublish publishes one of the four TUI events as given.
func (s *Server) tuiPublish(w http.ResponseWriter, r *http.Request) *apiError {
	var b tuiPublishBody
	if e := decodeJSON(r, &b, false); e != nil {
		return e
	}
	var props any
	switch b.Type {
	case eventTUIPromptAppend:
		var p tuiPromptBody
		if json.Unmarshal(b.Properties, &p) != nil || p.Text == nil {
			return badRequest("properties: want {text}")
		}
		props = map[string]string{"text": *p.Text}
	case eventTUICommand:
		var p tuiCommandBody
		if json.Unmarshal(b.Properties, &p) != nil || p.Command == "" {
			return badRequest("properties: want {command}")
		}
		props = map[string]string{"command": p.Command}
	case eventTUIToast:
		var p tuiToastBody
		if json.Unmarshal(b.Properties, &p) != nil {
			return badRequest("properties: want {title?, message, variant, duration?}")
		}
		if e := p.check(); e != nil {
			return e
		}
		props = p
	case eventTUISessionSelect:
		var p tuiSelectBody
		if json.Unmarshal(b.Properties, &p) != nil {
			return badRequest("properties: want {sessionID}")
		}
		if e := s.tuiSelectCheck(r.Context(), p); e != nil {
			return e
		}
		props = p
	default:
		return badRequest("type %q: want %s, %s, %s or %s", b.Type, eventTUIPromptAppend, eventTUICommand, eventTUIToast, eventTUISessionSelect)
	}
	s.hub.PublishLive(core.MustEvent("", b.Type, props))
	raw, _ := json.Marshal(map[string]any{"type": b.Type, "properties": props})
	s.tui.Push(tuictl.Request{Path: r.URL.Path, Body: raw})
	writeJSON(w, http.StatusOK, true)
	return nil
}

// tuiControlNext answers the oldest request made of TUIs that no poller
// has taken yet, waiting for one as opencode does: until the client goes
// away or the server stops, or for ?timeout= (a Go duration, agentd's
// own) after which it answers 204.
func (s *Server) tuiControlNext(w http.ResponseWriter, r *http.Request) *apiError {
	ctx := r.Context()
	if v := r.URL.Query().Get("timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return badRequest("timeout: %q is not a positive duration", v)
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	// The answer may come long after the request: no write deadline.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	req, err := s.tui.Next(ctx)
	switch {
	case err != nil && r.Context().Err() == nil:
		w.WriteHeader(http.StatusNoContent)
		return nil
	case err != nil:
		// The client went away (nothing reads this) or the server is
		// stopping.
		return &apiError{status: http.StatusServiceUnavailable, name: "ServerClosingError", msg: "no TUI request came before the server stopped"}
	}
	writeJSON(w, http.StatusOK, req)
	return nil
}

// tuiControlResponse takes a poller's answer. agentd asks a TUI nothing
// that waits for an answer, so the answer is read and dropped, as
// opencode's own queue (which no one reads) does.
func (s *Server) tuiControlResponse(w http.ResponseWriter, r *http.Request) *apiError {
	var v any
	if e := decodeJSON(r, &v, true); e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, true)
	return nil
}
