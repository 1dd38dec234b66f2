package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/agentd/agentd/internal/access"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// API keys: their routes (the operator's alone), the bearer token's
// check beside the password, and the gate every route passes (gatePass).

// keyRoutes are the API keys' routes, appended to the route table.
func (s *Server) keyRoutes() []route {
	return []route{
		{"GET", "/key", "API keys, revoked ones included (never their tokens): the sessions each sees, its budget and what its sessions spent.", true, s.listKeys},
		{"POST", "/key", "Make an API key; its bearer token is in this answer and nowhere else.", true, s.createKey},
		{"PATCH", "/key/{id}", "Change an API key's budget (by id or name).", true, s.updateKey},
		{"DELETE", "/key/{id}", "Revoke an API key (by id or name): refused at once here, within a second on every node.", true, s.revokeKey},
	}
}

// keyOps document keyRoutes.
func keyOps() map[string]op {
	return map[string]op{
		"GET /key":         {resp: []access.KeyInfo{}},
		"POST /key":        {body: keyBody{}, resp: access.KeyInfo{}},
		"PATCH /key/{id}":  {body: keyBudgetBody{}, resp: access.KeyInfo{}},
		"DELETE /key/{id}": {resp: access.KeyInfo{}},
	}
}

// keyBody is what POST /key takes.
type keyBody struct {
	Name string `json:"name" doc:"required"`
	// Sessions is "own" (the default) or "all".
	Sessions string       `json:"sessions"`
	Budget   *core.Budget `json:"budget"`
}

// keyBudgetBody is what PATCH /key/{id} takes (null or absent: no caps).
type keyBudgetBody struct {
	Budget *core.Budget `json:"budget"`
}

func (s *Server) keysOff() *apiError {
	if s.cfg.Keys == nil {
		return &apiError{status: http.StatusNotImplemented, name: "NotImplementedError", msg: "this server keeps no API keys"}
	}
	return nil
}

func (s *Server) keyErr(err error, what string) *apiError {
	var ie *access.InputError
	if errors.As(err, &ie) {
		return badRequest("%s", ie.Msg)
	}
	return s.storeErr(err, what)
}

func (s *Server) listKeys(w http.ResponseWriter, r *http.Request) *apiError {
	if e := s.keysOff(); e != nil {
		return e
	}
	list, err := s.cfg.Keys.List(r.Context())
	if err != nil {
		return s.storeErr(err, "keys")
	}
	out := make([]access.KeyInfo, len(list))
	for i, k := range list {
		out[i] = access.Info(k)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) createKey(w http.ResponseWriter, r *http.Request) *apiError {
	if e := s.keysOff(); e != nil {
		return e
	}
	var in keyBody
	if e := decodeJSON(r, &in, false); e != nil {
		return e
	}
	spec := access.Spec{Name: in.Name}
	switch in.Sessions {
	case "", "own":
	case "all":
		spec.All = true
	default:
		return badRequest("sessions: %q is not own or all", in.Sessions)
	}
	if in.Budget != nil {
		spec.Budget = *in.Budget
	}
	k, token, err := s.cfg.Keys.Create(r.Context(), spec)
	if err != nil {
		return s.keyErr(err, "key")
	}
	s.log.Info("API key made", "key", k.ID, "key_name", k.Name, "sessions", access.Info(k).Sessions)
	out := access.Info(k)
	out.Token = token
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) updateKey(w http.ResponseWriter, r *http.Request) *apiError {
	if e := s.keysOff(); e != nil {
		return e
	}
	var in keyBudgetBody
	if e := decodeJSON(r, &in, false); e != nil {
		return e
	}
	var b core.Budget
	if in.Budget != nil {
		b = *in.Budget
	}
	k, err := s.cfg.Keys.SetBudget(r.Context(), r.PathValue("id"), b)
	if err != nil {
		return s.keyErr(err, "key "+r.PathValue("id"))
	}
	writeJSON(w, http.StatusOK, access.Info(k))
	return nil
}

func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request) *apiError {
	if e := s.keysOff(); e != nil {
		return e
	}
	k, err := s.cfg.Keys.Revoke(r.Context(), r.PathValue("id"))
	if err != nil {
		return s.keyErr(err, "key "+r.PathValue("id"))
	}
	s.log.Info("API key revoked", "key", k.ID, "key_name", k.Name)
	writeJSON(w, http.StatusOK, access.Info(k))
	return nil
}

// bearer returns the token of an Authorization: Bearer header.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:]), true
	}
	return "", false
}

// keyNoter is the access log's recorder: it logs the request's key.
type keyNoter interface{ noteKey(id, name string) }

// authenticateKey checks a bearer token against the API keys. A wrong
// one counts as a failed login of its address (see loginFree); the
// answer never says whether the key exists.
func (g *guard) authenticateKey(w http.ResponseWriter, r *http.Request, token string) (*http.Request, bool) {
	c, err := g.keys.Authenticate(r.Context(), token)
	if err == nil {
		if n, ok := w.(keyNoter); ok {
			n.noteKey(c.KeyID, c.Name)
		}
		return r.WithContext(access.WithCaller(r.Context(), c)), true
	}
	if !errors.Is(err, access.ErrBadToken) {
		writeError(w, &apiError{status: http.StatusServiceUnavailable, name: "StorageError",
			msg: "the API keys cannot be read now; retry", retryAfter: storageRetryAfter})
		return r, false
	}
	if g.loginFailed(w, r) {
		return r, false
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="agentd"`)
	writeError(w, &apiError{status: http.StatusUnauthorized, name: "UnauthorizedError", msg: err.Error()})
	return r, false
}

// gate is what gatePass knows of a route: whether it is the operator's
// alone, the path value that names a session, and how the route's dialect
// says that a session does not exist.
type gate struct {
	operator bool
	param    string
	missing  func(w http.ResponseWriter, sessionID string)
}

// gateOf is a route's gate: v1 routes name a session as /session/{id}
// (also under /experimental), opencode 2's as {sessionID}.
func (s *Server) gateOf(rt route) gate {
	g := gate{operator: access.OperatorOnly(rt.method, rt.pattern)}
	switch {
	case strings.Contains(rt.pattern, "/session/{id}"):
		g.param = "id"
	case strings.Contains(rt.pattern, "{sessionID}"):
		g.param = "sessionID"
	}
	if m, ok := s.mounts[rt.method+" "+rt.pattern]; ok && m.NotFound != nil {
		g.missing = m.NotFound
	} else {
		g.missing = func(w http.ResponseWriter, id string) { writeError(w, s.storeErr(store.ErrNotFound, "session "+id)) }
	}
	return g
}

// gatePass is the gate every route passes, for both API dialects: a key is
// refused the operator's routes (403), and a route that names a session a
// key may not see (access.Keys.Sees) answers as it does for a session
// that does not exist, so that a key learns nothing of other keys'
// sessions. The operator passes.
func (s *Server) gatePass(w http.ResponseWriter, r *http.Request, g gate) bool {
	c := access.CallerOf(r.Context())
	if c == nil {
		return true
	}
	if g.operator {
		writeError(w, &apiError{status: http.StatusForbidden, name: "ForbiddenError", msg: "API keys may not use " + r.URL.Path + ": it is the operator's"})
		return false
	}
	if g.param == "" {
		return true
	}
	id := r.PathValue(g.param)
	ok, err := s.cfg.Keys.Sees(r.Context(), id)
	if err != nil {
		writeError(w, s.storeErr(err, "session "+id))
		return false
	}
	if !ok {
		g.missing(w, id)
		return false
	}
	return true
}

// sees is Keys.Sees for handlers that find a session other than by the
// path (a request's, a body's): false also when it cannot be read.
func (s *Server) sees(ctx context.Context, sessionID string) bool {
	ok, err := s.cfg.Keys.Sees(ctx, sessionID)
	if err != nil {
		s.log.LogAttrs(ctx, slog.LevelWarn, "read a session's owner", slog.String("session", sessionID), slog.Any("err", err))
	}
	return ok && err == nil
}
