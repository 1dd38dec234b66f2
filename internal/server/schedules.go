package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"

	"github.com/agentd/agentd/internal/schedule"
)

// scheduleRoutes are agentd's schedules: prompts sent on a cron
// expression or an interval (package schedule).
func (s *Server) scheduleRoutes() []route {
	return []route{
		{"POST", "/schedule", "Schedule a prompt: a cron expression or an interval; into a session, or a new session at each tick.", true, s.createSchedule},
		{"GET", "/schedule", "Every schedule, oldest first, with its next tick and its last one (with the run's outcome).", true, s.listSchedules},
		{"GET", "/schedule/{id}", "One schedule.", true, s.getSchedule},
		{"DELETE", "/schedule/{id}", "Remove a schedule: no tick fires after it.", true, s.deleteSchedule},
	}
}

func scheduleOps() map[string]op {
	return map[string]op{
		"POST /schedule":        {body: schedule.Spec{}, resp: schedule.Schedule{}},
		"GET /schedule":         {resp: []schedule.Schedule{}},
		"GET /schedule/{id}":    {resp: schedule.Schedule{}},
		"DELETE /schedule/{id}": {resp: true},
	}
}

// schedules is the node's scheduler, or the error that says there is none.
func (s *Server) schedules() (*schedule.Scheduler, *apiError) {
	if s.cfg.Schedules == nil {
		return nil, &apiError{status: http.StatusServiceUnavailable, name: "UnavailableError", msg: "schedules are not available on this server"}
	}
	return s.cfg.Schedules, nil
}

func (s *Server) createSchedule(w http.ResponseWriter, r *http.Request) *apiError {
	sc, e := s.schedules()
	if e != nil {
		return e
	}
	// agentd's own body is read strictly: a misspelt "timezone" must not
	// quietly become UTC.
	var raw json.RawMessage
	if e := decodeJSON(r, &raw, false); e != nil {
		return e
	}
	var spec schedule.Spec
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return badRequest("schedule: %v", err)
	}
	if e := s.scheduleAgent(spec.Agent); e != nil {
		return e
	}
	if spec.NewSession {
		if e := s.scheduleDirectory(r, &spec); e != nil {
			return e
		}
	} else {
		spec.Directory = ""
	}
	v, err := sc.Create(r.Context(), spec)
	var in *schedule.InputError
	if errors.As(err, &in) {
		return badRequest("%s", in.Error())
	}
	if err != nil {
		return s.storeErr(err, "schedule")
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// scheduleDirectory sets where a schedule's new sessions live: the body's
// directory, else the request's (as for POST /session), which must be a
// real workspace when a client named it.
func (s *Server) scheduleDirectory(r *http.Request, spec *schedule.Spec) *apiError {
	dir := spec.Directory
	named := dir != "" || r.URL.Query().Get("directory") != "" || r.Header.Get("x-opencode-directory") != ""
	if dir == "" {
		var e *apiError
		if dir, e = s.directory(r); e != nil {
			return e
		}
	}
	if !filepath.IsAbs(dir) {
		return badRequest("directory: %q must be an absolute path", dir)
	}
	if named {
		var e *apiError
		if dir, e = workspaceDir(dir); e != nil {
			return e
		}
	} else if real, err := filepath.EvalSymlinks(dir); err == nil && real == string(filepath.Separator) {
		return badRequest("directory: the server runs in %s, the filesystem's root, which cannot be a workspace; name a project's directory", dir)
	}
	spec.Directory = dir
	return nil
}

func (s *Server) listSchedules(w http.ResponseWriter, r *http.Request) *apiError {
	sc, e := s.schedules()
	if e != nil {
		return e
	}
	list, err := sc.List(r.Context())
	if err != nil {
		return s.storeErr(err, "schedules")
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

func (s *Server) getSchedule(w http.ResponseWriter, r *http.Request) *apiError {
	sc, e := s.schedules()
	if e != nil {
		return e
	}
	v, err := sc.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return s.storeErr(err, "schedule "+r.PathValue("id"))
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (s *Server) deleteSchedule(w http.ResponseWriter, r *http.Request) *apiError {
	sc, e := s.schedules()
	if e != nil {
		return e
	}
	if err := sc.Delete(r.Context(), r.PathValue("id")); err != nil {
		return s.storeErr(err, "schedule "+r.PathValue("id"))
	}
	writeJSON(w, http.StatusOK, true)
	return nil
}

// scheduleAgent refuses at once an agent a prompt could not name, rather
// than at every tick.
func (s *Server) scheduleAgent(name string) *apiError {
	if name == "" {
		return nil
	}
	for _, a := range s.cfg.Catalog.Agents {
		if a.Name == name {
			if a.Mode == "subagent" {
				return badRequest("agent: %q is a subagent; it answers the task tool, not prompts", name)
			}
			return nil
		}
	}
	return badRequest("agent: no agent %q (GET /agent lists them)", name)
}
