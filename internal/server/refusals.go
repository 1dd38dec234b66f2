package server

import (
	"cmp"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// opencode's routes for what agentd does not have — its cloud console,
// remote workspaces and their sync, provider OAuth logins, background
// subagents — answered in opencode's shape where the truth fits it (no
// orgs, no adapters, nothing backgrounded) and refused with a reason
// where it does not.

// notHere refuses a route whose capability agentd does not have.
func notHere(msg string) func(w http.ResponseWriter, r *http.Request) *apiError {
	return func(w http.ResponseWriter, r *http.Request) *apiError {
		return &apiError{status: http.StatusNotImplemented, name: "NotImplementedError", msg: msg}
	}
}

const (
	noConsole = "agentd is not connected to opencode's console (its cloud service): it has no org to switch to"
	noSync    = "agentd takes no part in opencode's workspace sync: it has no remote workspaces, and its durable event log is GET /event?after= (GET /session/{id}/event for one session)"
	noOAuth   = "agentd offers no OAuth login for providers (GET /provider/auth lists none): set the provider's key with PUT /auth/{id} or in the configuration"
)

type consoleOrgsJSON struct {
	Orgs []struct{} `json:"orgs"`
}

type workspaceAdapterJSON struct {
	Type        string `json:"type"`
	Name        string `json:"name"`
	Description string `json:"description"`
}

type workspaceCreateBody struct {
	Type string `json:"type"`
}

// createWorkspace refuses: agentd has no workspace adapters.
func (s *Server) createWorkspace(w http.ResponseWriter, r *http.Request) *apiError {
	var b workspaceCreateBody
	if e := decodeJSON(r, &b, false); e != nil {
		return e
	}
	return badRequest("workspace type %q: agentd has no workspace adapters (GET /experimental/workspace/adapter lists none); its sessions run in their directory on the server's machine", b.Type)
}

func (s *Server) removeWorkspace(w http.ResponseWriter, r *http.Request) *apiError {
	return notFound("workspace %s not found: agentd has no workspaces", r.PathValue("workspaceID"))
}

type warpBody struct {
	// ID is the workspace, or null for the session's local project.
	ID        json.RawMessage `json:"id"`
	SessionID string          `json:"sessionID"`
}

type consoleSwitchBody struct {
	AccountID string `json:"accountID"`
	OrgID     string `json:"orgID"`
}

// warp moves a session into a workspace, or with no id back to the local
// project: every agentd session is local already (204); there is no
// workspace to move one into.
func (s *Server) warp(w http.ResponseWriter, r *http.Request) *apiError {
	var b warpBody
	if e := decodeJSON(r, &b, false); e != nil {
		return e
	}
	if !strings.HasPrefix(b.SessionID, core.PrefixSession) {
		return badRequest("sessionID %q is not a session id", b.SessionID)
	}
	if _, err := s.st.Session(r.Context(), b.SessionID); err != nil || !s.sees(r.Context(), b.SessionID) {
		return s.storeErr(cmp.Or(err, store.ErrNotFound), "session "+b.SessionID)
	}
	if id := strings.TrimSpace(string(b.ID)); id != "" && id != "null" {
		return notFound("workspace %s not found: agentd has no workspaces", id)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func noContent(w http.ResponseWriter, r *http.Request) *apiError {
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// background answers opencode's "background the running subagents" with
// its own answer when the capability is off: false, nothing was
// backgrounded (agentd's task tool waits for its subagent).
func (s *Server) background(w http.ResponseWriter, r *http.Request) *apiError {
	if _, err := s.st.Session(r.Context(), r.PathValue("id")); err != nil {
		return s.storeErr(err, "session "+r.PathValue("id"))
	}
	writeJSON(w, http.StatusOK, false)
	return nil
}

// oauth refuses a provider OAuth step.
func (s *Server) oauth(w http.ResponseWriter, r *http.Request) *apiError {
	var v map[string]any
	if e := decodeJSON(r, &v, true); e != nil {
		return e
	}
	return badRequest("provider %s: %s", r.PathValue("providerID"), noOAuth)
}

// oauthBody is a provider OAuth step: the login method's index and, for
// the callback, the code.
type oauthBody struct {
	Method float64 `json:"method"`
	Code   string  `json:"code,omitempty"`
}

type mcpCallbackBody struct {
	Code string `json:"code"`
}
