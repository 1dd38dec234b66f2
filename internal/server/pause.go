package server

import (
	"errors"
	"net/http"

	"github.com/agentd/agentd/internal/asks"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/pause"
)

// resumeSession continues the session's run held paused after a restart
// (package pause) and answers the session's status; 409 when no run of
// the session is paused.
func (s *Server) resumeSession(w http.ResponseWriter, r *http.Request) *apiError {
	id := r.PathValue("id")
	if err := s.eng.Resume(r.Context(), id); err != nil {
		if errors.Is(err, pause.ErrNotPaused) {
			return &apiError{status: http.StatusConflict, name: "ConflictError", msg: "session " + id + ": " + err.Error()}
		}
		return s.storeErr(err, "session "+id)
	}
	return s.sessionStatus(w, r)
}

// checkSessionSettings checks agentd's own keys of PATCH /session/{id}:
// how the session resumes after a restart and its asks' timeout.
func checkSessionSettings(resume *string, a *core.SessionAsks) *apiError {
	if resume != nil {
		if err := pause.Check(*resume); err != nil {
			return badRequest("%v", err)
		}
	}
	if a != nil {
		if err := asks.CheckSession(*a); err != nil {
			return badRequest("%v", err)
		}
	}
	return nil
}
