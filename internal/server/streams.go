package server

import (
	"net/http"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/events"
)

func (s *Server) stream(w http.ResponseWriter, r *http.Request, sessionID string, wrap func(core.Event) any) *apiError {
	after, ok, err := events.ParseCursor(r)
	if err != nil {
		return badRequest("%v", err)
	}
	if sessionID != "" {
		if _, err := s.st.Session(r.Context(), sessionID); err != nil {
			return s.storeErr(err, "session "+sessionID)
		}
	}
	// A key's stream ends with the key's revocation.
	ctx, stop := s.cfg.Keys.Watch(r.Context())
	defer stop()
	err = s.hub.Stream(ctx, w, s.st.EventBounds, events.StreamOptions{
		After: after, HasCursor: ok, SessionID: sessionID, Heartbeat: s.cfg.Heartbeat, LiveWindow: s.cfg.LiveWindow, Wrap: wrap,
		Filter: s.cfg.Keys.EventFilter(r.Context()),
	})
	if err != nil && r.Context().Err() == nil {
		s.log.Debug("event stream ended", "err", err)
	}
	return nil
}

func (s *Server) eventStream(w http.ResponseWriter, r *http.Request) *apiError {
	return s.stream(w, r, "", nil)
}

func (s *Server) sessionEventStream(w http.ResponseWriter, r *http.Request) *apiError {
	return s.stream(w, r, r.PathValue("id"), nil)
}

// globalEventStream wraps each event with the directory of its session,
// which opencode's clients use to route it.
func (s *Server) globalEventStream(w http.ResponseWriter, r *http.Request) *apiError {
	ctx := r.Context()
	return s.stream(w, r, "", func(ev core.Event) any {
		return map[string]any{"directory": s.sessionDir(ctx, ev.SessionID), "payload": ev}
	})
}
