package server

import (
	"errors"
	"net/http"
	"regexp"
	"strings"
	"sync"

	"github.com/agentd/agentd/internal/pty"
)

// Terminals (opencode's /pty routes, the web app's terminal panel) are a
// shell for whoever can reach the API: served only when the operator
// turned them on (Config.Terminals), behind the same middleware as every
// route. The websocket is reached with the password like every route, or
// with a connect token instead (see connectTicket).

// ptyRoutes are the terminal routes, appended to the route table.
func (s *Server) ptyRoutes() []route {
	return []route{
		{"GET", "/pty/shells", "The shells of the server's machine (/etc/shells).", false, s.ptyShells},
		{"GET", "/pty", "The request's directory's terminals, running or exited (kept with their output until removed).", false, s.ptyList},
		{"POST", "/pty", "Start a terminal: a shell (or command) in a real pseudo-terminal, in the request's directory, confined like the model's commands.", false, s.ptyCreate},
		{"GET", "/pty/{ptyID}", "One terminal.", false, s.ptyGet},
		{"PUT", "/pty/{ptyID}", "Set a terminal's title or size.", false, s.ptyUpdate},
		{"DELETE", "/pty/{ptyID}", "End a terminal and everything it started, and forget it.", false, s.ptyRemove},
		{"POST", "/pty/{ptyID}/connect-token", "A single-use ticket (60 s) that opens the terminal's websocket without the password; needs the header x-opencode-ticket: 1.", false, s.ptyTicket},
		{"GET", "/pty/{ptyID}/connect", "The terminal's websocket: its kept output from ?cursor=, a cursor frame, then live output; what the client sends is typed.", false, s.ptyConnect},
	}
}

func ptyOps(m map[string]op) {
	// The terminal routes' documentation, kept here with them.
	for k, v := range map[string]op{
		"GET /pty/shells":                 {resp: []pty.Shell{}},
		"GET /pty":                        {resp: []pty.Info{}},
		"POST /pty":                       {body: pty.CreateInput{}, resp: pty.Info{}},
		"GET /pty/{ptyID}":                {resp: pty.Info{}},
		"PUT /pty/{ptyID}":                {body: pty.UpdateInput{}, resp: pty.Info{}},
		"DELETE /pty/{ptyID}":             {resp: true},
		"POST /pty/{ptyID}/connect-token": {resp: pty.Ticket{}},
		"GET /pty/{ptyID}/connect": {resp: true, query: []param{
			{"cursor", "integer", "replay the kept output from this position (0: all kept, -1: none)"},
			{"ticket", "string", "a connect token, instead of the password"}}},
	} {
		m[k] = v
	}
}

// ptyOff answers every terminal route while terminals are off.
var ptyOff = tagged(http.StatusForbidden, "PtyForbiddenError",
	`terminals are off on this server: the operator turns them on with "agentd": {"terminal": {"enabled": true}} in the global agentd.json or the --config file`, nil)

// terminals returns the terminal service, or the refusal while it is off.
func (s *Server) terminals() (pty.Service, *apiError) {
	if s.cfg.Terminals == nil {
		return nil, ptyOff
	}
	return s.cfg.Terminals, nil
}

// ptyErr maps the terminal service's errors.
func ptyErr(err error, id string) *apiError {
	var ie *pty.InputError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pty.ErrNotFound):
		return tagged(http.StatusNotFound, "PtyNotFoundError", "PTY session not found: "+id, map[string]string{"ptyID": id})
	case errors.As(err, &ie):
		return badRequest("%s", ie.Msg)
	case errors.Is(err, pty.ErrStopped):
		return &apiError{status: http.StatusServiceUnavailable, name: "ServerClosingError", msg: err.Error()}
	default:
		return &apiError{status: http.StatusInternalServerError, name: "UnknownError", msg: "terminal: " + err.Error()}
	}
}

// ptyDir is the request's directory as a workspace.
func (s *Server) ptyDir(r *http.Request) (string, *apiError) {
	dir, e := s.directory(r)
	if e != nil {
		return "", e
	}
	return workspaceDir(dir)
}

func (s *Server) ptyShells(w http.ResponseWriter, r *http.Request) *apiError {
	t, e := s.terminals()
	if e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, t.Shells())
	return nil
}

func (s *Server) ptyList(w http.ResponseWriter, r *http.Request) *apiError {
	t, e := s.terminals()
	if e != nil {
		return e
	}
	dir, e := s.ptyDir(r)
	if e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, t.List(dir))
	return nil
}

func (s *Server) ptyCreate(w http.ResponseWriter, r *http.Request) *apiError {
	t, e := s.terminals()
	if e != nil {
		return e
	}
	var in pty.CreateInput
	if e := decodeJSON(r, &in, true); e != nil {
		return e
	}
	if in.Dir, e = s.ptyDir(r); e != nil {
		return e
	}
	info, err := t.Create(in)
	if err != nil {
		return ptyErr(err, "")
	}
	writeJSON(w, http.StatusOK, info)
	return nil
}

func (s *Server) ptyGet(w http.ResponseWriter, r *http.Request) *apiError {
	t, e := s.terminals()
	if e != nil {
		return e
	}
	id := r.PathValue("ptyID")
	info, err := t.Get(id)
	if err != nil {
		return ptyErr(err, id)
	}
	writeJSON(w, http.StatusOK, info)
	return nil
}

func (s *Server) ptyUpdate(w http.ResponseWriter, r *http.Request) *apiError {
	t, e := s.terminals()
	if e != nil {
		return e
	}
	var in pty.UpdateInput
	if e := decodeJSON(r, &in, true); e != nil {
		return e
	}
	id := r.PathValue("ptyID")
	info, err := t.Update(id, in)
	if err != nil {
		return ptyErr(err, id)
	}
	writeJSON(w, http.StatusOK, info)
	return nil
}

func (s *Server) ptyRemove(w http.ResponseWriter, r *http.Request) *apiError {
	t, e := s.terminals()
	if e != nil {
		return e
	}
	id := r.PathValue("ptyID")
	if err := t.Remove(id); err != nil {
		return ptyErr(err, id)
	}
	writeJSON(w, http.StatusOK, true)
	return nil
}

// ptyTicket issues a connect token. opencode asks for a header a page of
// another site cannot send without the browser asking the server first;
// the middleware has already refused foreign origins.
func (s *Server) ptyTicket(w http.ResponseWriter, r *http.Request) *apiError {
	t, e := s.terminals()
	if e != nil {
		return e
	}
	if r.Header.Get("x-opencode-ticket") != "1" {
		return tagged(http.StatusForbidden, "PtyForbiddenError", "Invalid PTY connect token request: send the header x-opencode-ticket: 1", nil)
	}
	id := r.PathValue("ptyID")
	tk, err := t.Ticket(id)
	if err != nil {
		return ptyErr(err, id)
	}
	writeJSON(w, http.StatusOK, tk)
	return nil
}

// ptyConnect serves the websocket. A ticket in the URL was spent by the
// middleware, which let the request through only if it was valid.
func (s *Server) ptyConnect(w http.ResponseWriter, r *http.Request) *apiError {
	t, e := s.terminals()
	if e != nil {
		return e
	}
	id := r.PathValue("ptyID")
	if _, err := t.Get(id); err != nil {
		if errors.Is(err, pty.ErrNotFound) {
			return notFound("PTY session not found: %s", id)
		}
		return ptyErr(err, id)
	}
	cursor, err := pty.ParseCursor(r.URL.Query().Get("cursor"))
	if err != nil {
		return badRequest("%v", err)
	}
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return badRequest("%s is a websocket: ask with Connection: Upgrade and Upgrade: websocket", r.URL.Path)
	}
	if err := t.Connect(w, r, id, cursor); err != nil {
		if errors.Is(err, pty.ErrNotFound) {
			return notFound("PTY session not found: %s", id)
		}
		return ptyErr(err, id)
	}
	return nil
}

// connectPath is a terminal's websocket, in both APIs.
var connectPath = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^/(?:api/)?pty/([^/]+)/connect$`) })

// connectTicket returns the terminal and the ticket of a websocket
// request that carries one (?ticket=).
func connectTicket(r *http.Request) (id, ticket string, ok bool) {
	if r.Method != http.MethodGet {
		return "", "", false
	}
	m := connectPath().FindStringSubmatch(r.URL.Path)
	if m == nil {
		return "", "", false
	}
	ticket = r.URL.Query().Get("ticket")
	return m[1], ticket, ticket != ""
}

// ticketRefused answers a websocket whose ticket does not open it, in the
// error shape of the API it was asked through (opencode 2's ForbiddenError
// on /api).
func ticketRefused(path string) *apiError {
	tag, route := "Forbidden", "POST /pty/{ptyID}/connect-token"
	if strings.HasPrefix(path, "/api/") {
		tag, route = "ForbiddenError", "POST /api/pty/{ptyID}/connect-token"
	}
	return tagged(http.StatusForbidden, tag, "the connect ticket is not valid for this terminal "+
		"(spent, expired or unknown): ask for another with "+route, nil)
}

// consumeTicket spends a connect token for terminal id.
func (s *Server) consumeTicket(ticket, id string) bool {
	return s.cfg.Terminals != nil && s.cfg.Terminals.ConsumeTicket(ticket, id)
}
