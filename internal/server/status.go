package server

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/agentd/agentd/internal/access"
	"github.com/agentd/agentd/internal/core"
)

// listStatus is opencode's status map: sessions with a non-terminal run,
// in opencode's strict status shape.
func (s *Server) listStatus(w http.ResponseWriter, r *http.Request) *apiError {
	m, err := s.st.ActiveStatuses(r.Context())
	if err == nil {
		m, err = access.VisibleMap(r.Context(), s.cfg.Keys, m)
	}
	if err != nil {
		return s.storeErr(err, "status")
	}
	writeRaw(w, http.StatusOK, appendStatusList(nil, m))
	return nil
}

// appendStatusList appends opencode's status map, sorted by session id.
// Written by hand because pollers read it in a loop: the reflecting
// encoder was a fifth of the route's cost with 100 busy sessions.
func appendStatusList(b []byte, m map[string]core.SessionStatus) []byte {
	ids := slices.Sorted(maps.Keys(m))
	b = append(b, '{')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, id)
		b = append(b, ':')
		switch st := m[id]; st.Type {
		case core.StatusBusy, core.StatusIdle:
			b = append(b, `{"type":"`...)
			b = append(b, st.Type...)
			b = append(b, `"}`...)
		default:
			v, _ := json.Marshal(st.Opencode())
			b = append(b, v...)
		}
	}
	return append(b, '}', '\n')
}

// appendJSONString appends s as a JSON string, directly when it needs no
// escaping (agentd's ids never do).
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			v, _ := json.Marshal(s)
			return append(b, v...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// listActive is agentd's status map: the same sessions with the full
// status (run id, since, phase).
func (s *Server) listActive(w http.ResponseWriter, r *http.Request) *apiError {
	m, err := s.st.ActiveStatuses(r.Context())
	if err == nil {
		m, err = access.VisibleMap(r.Context(), s.cfg.Keys, m)
	}
	if err != nil {
		return s.storeErr(err, "status")
	}
	writeJSON(w, http.StatusOK, m)
	return nil
}

func (s *Server) sessionStatus(w http.ResponseWriter, r *http.Request) *apiError {
	b, err := s.st.SessionStatusJSON(r.Context(), r.PathValue("id"))
	if err != nil {
		return s.storeErr(err, "session "+r.PathValue("id"))
	}
	writeRaw(w, http.StatusOK, append(b, '\n'))
	return nil
}

// parseTimeout reads ?timeout= as a Go duration ("30s") or a number of
// seconds, clamped to [0, max].
func parseTimeout(r *http.Request, def, maxD time.Duration) (time.Duration, *apiError) {
	v := r.URL.Query().Get("timeout")
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		f, ferr := strconv.ParseFloat(v, 64)
		if ferr != nil || f != f {
			return 0, badRequest("timeout: %q is neither a duration (30s) nor a number of seconds", v)
		}
		if f > maxD.Seconds() {
			f = maxD.Seconds()
		}
		d = time.Duration(f * float64(time.Second))
	}
	if d < 0 {
		return 0, badRequest("timeout: %q is negative", v)
	}
	return min(d, maxD), nil
}

func (s *Server) wait(w http.ResponseWriter, r *http.Request) *apiError {
	timeout, e := parseTimeout(r, 30*time.Second, 10*time.Minute)
	if e != nil {
		return e
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	st, err := s.eng.WaitIdle(ctx, r.PathValue("id"), r.URL.Query().Get("run"))
	if errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil {
		writeJSON(w, http.StatusRequestTimeout, st)
		return nil
	}
	if err != nil {
		return s.storeErr(err, "session or run")
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}
