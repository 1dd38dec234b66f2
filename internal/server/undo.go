package server

import (
	"errors"
	"net/http"
	"strings"

	"github.com/agentd/agentd/internal/access"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/engine"
	"github.com/agentd/agentd/internal/snapshot"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/undo"
)

// Undo, redo, diff and fork: opencode's routes over the engine's
// snapshots (engine/revert.go, engine/diff.go).

// busy is opencode's answer to a change of a session that is running.
func busy(sessionID string) *apiError {
	return tagged(http.StatusConflict, "SessionBusyError", "session "+sessionID+" is busy: abort its run or wait for it to end",
		map[string]string{"sessionID": sessionID})
}

// undoErr maps the engine's errors of the routes here. A revert that is
// refused or fails says why with a 4xx: busy (a run, another revert),
// unknown message, a file that cannot be restored as asked (a symbolic
// link on its way), or a failure that was rolled back.
func (s *Server) undoErr(err error, sessionID string) *apiError {
	var refused *snapshot.RefusedError
	var failed *undo.FailedError
	switch {
	case errors.Is(err, undo.ErrReverting):
		return tagged(http.StatusConflict, "SessionBusyError", "session "+sessionID+" is busy: "+strings.TrimPrefix(err.Error(), "session is busy: "),
			map[string]string{"sessionID": sessionID})
	case errors.Is(err, engine.ErrSessionBusy):
		return busy(sessionID)
	case errors.Is(err, store.ErrNotFound):
		return notFound("%v", err)
	case errors.As(err, &refused):
		return tagged(http.StatusConflict, "RevertConflictError", "nothing was reverted: "+refused.Error(),
			map[string]string{"sessionID": sessionID, "path": refused.Path})
	case errors.Is(err, snapshot.ErrTooLarge):
		return tagged(http.StatusConflict, "RevertConflictError", "nothing was reverted: "+err.Error(), map[string]string{"sessionID": sessionID})
	case errors.As(err, &failed):
		s.log.Warn("revert failed", "session", sessionID, "err", err)
		return tagged(http.StatusConflict, "RevertFailedError", failed.Error(), map[string]string{"sessionID": sessionID})
	case errors.Is(err, undo.ErrUnavailable):
		return badRequest("%v", err)
	case errors.Is(err, undo.ErrStopped):
		return &apiError{status: http.StatusServiceUnavailable, name: "ServerClosingError", msg: err.Error()}
	}
	return s.storeErr(err, "session "+sessionID)
}

// revertBody is the request of POST /session/{id}/revert.
type revertBody struct {
	MessageID string `json:"messageID" doc:"required"`
	PartID    string `json:"partID"`
}

func (s *Server) revert(w http.ResponseWriter, r *http.Request) *apiError {
	var in revertBody
	if e := decodeJSON(r, &in, false); e != nil {
		return e
	}
	if !core.ValidID(core.PrefixMessage, in.MessageID) {
		return badRequest("messageID: %q is not a message id (msg_…)", in.MessageID)
	}
	if in.PartID != "" && !core.ValidID(core.PrefixPart, in.PartID) {
		return badRequest("partID: %q is not a part id (prt_…)", in.PartID)
	}
	id := r.PathValue("id")
	sess, err := s.eng.Revert(r.Context(), id, in.MessageID, in.PartID)
	if err != nil {
		return s.undoErr(err, id)
	}
	writeJSON(w, http.StatusOK, sess)
	return nil
}

func (s *Server) unrevert(w http.ResponseWriter, r *http.Request) *apiError {
	id := r.PathValue("id")
	sess, err := s.eng.Unrevert(r.Context(), id)
	if err != nil {
		return s.undoErr(err, id)
	}
	writeJSON(w, http.StatusOK, sess)
	return nil
}

// forkBody is the request of POST /session/{id}/fork.
type forkBody struct {
	MessageID string `json:"messageID"`
}

func (s *Server) fork(w http.ResponseWriter, r *http.Request) *apiError {
	var in forkBody
	if e := decodeJSON(r, &in, true); e != nil {
		return e
	}
	if in.MessageID != "" && !core.ValidID(core.PrefixMessage, in.MessageID) {
		return badRequest("messageID: %q is not a message id (msg_…)", in.MessageID)
	}
	id := r.PathValue("id")
	sess, err := s.eng.Fork(r.Context(), id, in.MessageID, access.Owner(r.Context()))
	if err != nil {
		return s.undoErr(err, id)
	}
	writeJSON(w, http.StatusOK, sess)
	return nil
}

// shellBody is the request of POST /session/{id}/shell.
type shellBody struct {
	MessageID string         `json:"messageID"`
	Agent     string         `json:"agent"`
	Model     *core.ModelRef `json:"model"`
	Command   string         `json:"command" doc:"required"`
}

// shell runs the user's own command in the session (opencode's shell
// mode) and answers, once it has run, with the assistant message holding
// the bash call and its output.
func (s *Server) shell(w http.ResponseWriter, r *http.Request) *apiError {
	var in shellBody
	if e := decodeJSON(r, &in, false); e != nil {
		return e
	}
	if in.Command == "" {
		return badRequest("command: required")
	}
	id := r.PathValue("id")
	adm, err := s.eng.Shell(r.Context(), id, engine.PromptInput{MessageID: in.MessageID, Agent: in.Agent, Model: in.Model, Shell: in.Command})
	if errors.Is(err, engine.ErrSessionBusy) {
		return busy(id)
	}
	if err != nil {
		return s.storeErr(err, "session "+id)
	}
	return s.answerRun(w, r, adm)
}

// share answers POST and DELETE /session/{id}/share: agentd does not
// publish sessions (GET /config says "share": "disabled", which opencode's
// TUI reads to hide sharing).
func (s *Server) share(w http.ResponseWriter, r *http.Request) *apiError {
	id := r.PathValue("id")
	if _, err := s.st.Session(r.Context(), id); err != nil {
		return s.storeErr(err, "session "+id)
	}
	return badRequest("sharing is not available on this server: agentd keeps sessions on the machine that runs it")
}
