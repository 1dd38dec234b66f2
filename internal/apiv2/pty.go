package apiv2

import (
	"errors"
	"net/http"
	"strings"

	"github.com/agentd/agentd/internal/pty"
	"github.com/agentd/agentd/internal/server"
)

// The terminal routes (/api/pty*) in opencode 2's shapes, over the one
// terminal service the v1 /pty routes call (Config.Terminals): a terminal
// made through either API is the other's too, with the same output, the
// same websocket protocol and the same connect tickets (which the server's
// middleware spends for both). Off unless the operator turned terminals
// on, as v1's.

// ptyRoutes are the terminal operations, in the document's order.
func (a *API) ptyRoutes() []v2route {
	return []v2route{
		{"GET", "/api/pty", "v2.pty.list", "The location's terminals, running or exited (kept with their output until removed).", a.ptyList,
			loc(located[[]pty.Info]{})},
		{"POST", "/api/pty", "v2.pty.create", "Start a terminal: a shell (or command) in a real pseudo-terminal, in the location's directory, confined like the model's commands.", a.ptyCreate,
			server.RouteDoc{Query: []server.Param{qLocation}, Body: pty.CreateInput{}, Resp: located[pty.Info]{}}},
		{"GET", "/api/pty/{ptyID}", "v2.pty.get", "One terminal.", a.ptyGet, loc(located[pty.Info]{})},
		{"PUT", "/api/pty/{ptyID}", "v2.pty.update", "Set a terminal's title or size.", a.ptyUpdate,
			server.RouteDoc{Query: []server.Param{qLocation}, Body: pty.UpdateInput{}, Resp: located[pty.Info]{}}},
		{"DELETE", "/api/pty/{ptyID}", "v2.pty.remove", "End a terminal and everything it started, and forget it.", a.ptyRemove,
			server.RouteDoc{Query: []server.Param{qLocation}, Status: http.StatusNoContent}},
		{"POST", "/api/pty/{ptyID}/connect-token", "v2.pty.connectToken", "A single-use ticket (60 s) that opens the terminal's websocket without the password; needs the header x-opencode-ticket: 1.", a.ptyTicket,
			loc(located[pty.Ticket]{})},
		{"GET", "/api/pty/{ptyID}/connect", "v2.pty.connect", "The terminal's websocket: its kept output from ?cursor=, a cursor frame, then live output; what the client sends is typed.", a.ptyConnect,
			server.RouteDoc{Resp: true, Query: []server.Param{qLocation,
				{Name: "cursor", Kind: "integer", About: "replay the kept output from this position (0: all kept, -1: none)"},
				{Name: "ticket", Kind: "string", About: "a connect token, instead of the password"}}}},
	}
}

// terminals returns the terminal service, or the refusal while the
// operator has not turned terminals on.
func (a *API) terminals() (pty.Service, *apiError) {
	if a.cfg.Terminals == nil {
		return nil, tagged(http.StatusForbidden, "ForbiddenError",
			`terminals are off on this server: the operator turns them on with "agentd": {"terminal": {"enabled": true}} in the global agentd.json or the --config file`)
	}
	return a.cfg.Terminals, nil
}

// ptyAt returns the terminal service and the request's directory.
func (a *API) ptyAt(r *http.Request) (pty.Service, string, *apiError) {
	t, e := a.terminals()
	if e != nil {
		return nil, "", e
	}
	dir, e := a.reqDir(r)
	if e != nil {
		return nil, "", e
	}
	return t, dir, nil
}

// ptyErr maps the terminal service's errors to opencode 2's.
func ptyErr(err error, id string) *apiError {
	var ie *pty.InputError
	switch {
	case errors.Is(err, pty.ErrNotFound):
		return tagged(http.StatusNotFound, "PtyNotFoundError", "PTY session not found: "+id, "ptyID", id)
	case errors.As(err, &ie):
		return invalid("%s", ie.Msg)
	case errors.Is(err, pty.ErrStopped):
		return unavailable(err.Error())
	default:
		return tagged(http.StatusInternalServerError, "UnknownError", "terminal: "+err.Error())
	}
}

// ptyAnswer answers a terminal (or its ticket) at the request's location.
func ptyAnswer(w http.ResponseWriter, dir string, v any, err error, id string) *apiError {
	if err != nil {
		return ptyErr(err, id)
	}
	writeJSON(w, http.StatusOK, map[string]any{"location": location(dir), "data": v})
	return nil
}

func (a *API) ptyList(w http.ResponseWriter, r *http.Request) *apiError {
	t, dir, e := a.ptyAt(r)
	if e != nil {
		return e
	}
	return ptyAnswer(w, dir, t.List(dir), nil, "")
}

func (a *API) ptyCreate(w http.ResponseWriter, r *http.Request) *apiError {
	t, dir, e := a.ptyAt(r)
	if e != nil {
		return e
	}
	var in pty.CreateInput
	if e := decode(r, &in, true); e != nil {
		return e
	}
	in.Dir = dir
	info, err := t.Create(in)
	return ptyAnswer(w, dir, info, err, "")
}

func (a *API) ptyGet(w http.ResponseWriter, r *http.Request) *apiError {
	t, dir, e := a.ptyAt(r)
	if e != nil {
		return e
	}
	id := r.PathValue("ptyID")
	info, err := t.Get(id)
	return ptyAnswer(w, dir, info, err, id)
}

func (a *API) ptyUpdate(w http.ResponseWriter, r *http.Request) *apiError {
	t, dir, e := a.ptyAt(r)
	if e != nil {
		return e
	}
	var in pty.UpdateInput
	if e := decode(r, &in, false); e != nil {
		return e
	}
	id := r.PathValue("ptyID")
	info, err := t.Update(id, in)
	return ptyAnswer(w, dir, info, err, id)
}

func (a *API) ptyRemove(w http.ResponseWriter, r *http.Request) *apiError {
	t, _, e := a.ptyAt(r)
	if e != nil {
		return e
	}
	id := r.PathValue("ptyID")
	if err := t.Remove(id); err != nil {
		return ptyErr(err, id)
	}
	noContent(w)
	return nil
}

// ptyTicket issues a connect token. As opencode's, it asks for a header a
// page of another site cannot send without the browser asking the server
// first; the middleware has already refused foreign origins.
func (a *API) ptyTicket(w http.ResponseWriter, r *http.Request) *apiError {
	t, dir, e := a.ptyAt(r)
	if e != nil {
		return e
	}
	if r.Header.Get("x-opencode-ticket") != "1" {
		return tagged(http.StatusForbidden, "ForbiddenError", "Invalid PTY connect token request: send the header x-opencode-ticket: 1")
	}
	id := r.PathValue("ptyID")
	tk, err := t.Ticket(id)
	return ptyAnswer(w, dir, tk, err, id)
}

// ptyConnect serves the websocket (the pty package's protocol, v1's). A
// ticket in the URL was spent by the middleware, which let the request
// through only if it was valid for this terminal.
func (a *API) ptyConnect(w http.ResponseWriter, r *http.Request) *apiError {
	t, e := a.terminals()
	if e != nil {
		return e
	}
	id := r.PathValue("ptyID")
	if _, err := t.Get(id); err != nil {
		return ptyErr(err, id)
	}
	cursor, err := pty.ParseCursor(r.URL.Query().Get("cursor"))
	if err != nil {
		return invalid("%v", err)
	}
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return invalid("%s is a websocket: ask with Connection: Upgrade and Upgrade: websocket", r.URL.Path)
	}
	if err := t.Connect(w, r, id, cursor); err != nil {
		return ptyErr(err, id)
	}
	return nil
}
