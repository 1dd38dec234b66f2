package server

import (
	"context"
	"errors"
	"net/http"
	"path"
	"sort"
	"strconv"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/workspace"
)

// opencode's /vcs routes: the project's git, for the people using a
// client (the TUI's /diff, the web app's review and apply). They read the
// request's directory through internal/workspace (every git through
// safegit.Project, which never reads the repository's configuration);
// what the operator's rules deny to read is left out, judged on the path
// as it really is (readRules, as the file routes do); a patch is applied
// only when the operator's rules deny editing none of its files.

// vcsStatusJSON is opencode's VcsFileStatus.
type vcsStatusJSON struct {
	File      string `json:"file"`
	Additions int    `json:"additions"`
	Deletions int    `json:"deletions"`
	Status    string `json:"status"`
}

// vcsApplyBody is POST /vcs/apply's body.
type vcsApplyBody struct {
	Patch *string `json:"patch"`
}

// vcsAppliedJSON is POST /vcs/apply's answer.
type vcsAppliedJSON struct {
	Applied bool `json:"applied"`
}

// hiddenIn judges a path relative to dir by the operator's read rules
// there (readRules.hidden: links followed).
func (s *Server) hiddenIn(dir string) func(rel string) bool {
	rr := s.readRules(dir)
	return func(rel string) bool { return rr.hidden(rel) }
}

func (s *Server) vcsStatus(w http.ResponseWriter, r *http.Request) *apiError {
	changes, e := s.visibleChanges(r)
	if e != nil {
		return e
	}
	out := []vcsStatusJSON{}
	for _, c := range changes {
		out = append(out, vcsStatusJSON{File: c.Path, Additions: c.Added, Deletions: c.Removed, Status: c.Status})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].File < out[j].File })
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) vcsDiff(w http.ResponseWriter, r *http.Request) *apiError {
	dir, e := s.fileDir(r)
	if e != nil {
		return e
	}
	q := r.URL.Query()
	mode := q.Get("mode")
	if mode != workspace.ModeGit && mode != workspace.ModeBranch {
		return badRequest("mode: %q is not git or branch", mode)
	}
	o := workspace.DiffOptions{Mode: mode, Context: -1, Hidden: s.hiddenIn(dir)}
	if v := q.Get("context"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return badRequest("context: %q is not a non-negative integer", v)
		}
		o.Context = n
	}
	diffs, err := workspace.VcsDiff(r.Context(), dir, o)
	if err != nil {
		return s.vcsErr(err, dir)
	}
	writeJSON(w, http.StatusOK, diffs)
	return nil
}

func (s *Server) vcsDiffRaw(w http.ResponseWriter, r *http.Request) *apiError {
	dir, e := s.fileDir(r)
	if e != nil {
		return e
	}
	patch, err := workspace.VcsRaw(r.Context(), dir, s.hiddenIn(dir))
	if err != nil {
		return s.vcsErr(err, dir)
	}
	w.Header().Set("Content-Type", "text/x-diff; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(patch)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(patch))
	return nil
}

// vcsApply applies a client's patch to the work tree: a client's action,
// like the user's shell command, so the operator's deny rules on edit
// apply to every file it names (and asks do not: the user sent it).
func (s *Server) vcsApply(w http.ResponseWriter, r *http.Request) *apiError {
	dir, e := s.fileDir(r)
	if e != nil {
		return e
	}
	var in vcsApplyBody
	if e := decodeJSON(r, &in, false); e != nil {
		return e
	}
	if in.Patch == nil {
		return badRequest("patch: required")
	}
	denied := s.editRules(dir)
	err := workspace.VcsApply(r.Context(), dir, *in.Patch, denied)
	var ae *workspace.ApplyError
	var de *workspace.DeniedError
	switch {
	case errors.As(err, &ae):
		return &apiError{status: http.StatusBadRequest, name: "VcsApplyError",
			body: core.Error{Name: "VcsApplyError", Data: core.ErrorData{Message: ae.Message, Extra: map[string]any{"reason": ae.Reason}}}, msg: ae.Message}
	case errors.As(err, &de):
		return &apiError{status: http.StatusForbidden, name: "ForbiddenError", msg: de.Error()}
	case errors.Is(err, workspace.ErrPatchTooLarge):
		return &apiError{status: http.StatusRequestEntityTooLarge, name: "PayloadTooLargeError", msg: err.Error()}
	case err != nil:
		return s.vcsErr(err, dir)
	}
	writeJSON(w, http.StatusOK, vcsAppliedJSON{Applied: true})
	return nil
}

// editRules judges a path (relative to dir) by the operator's edit rules,
// relative to dir and, inside the server's directory, to that too.
func (s *Server) editRules(dir string) func(rel string) bool {
	rr := s.readRules(dir)
	return func(rel string) bool {
		rel = path.Clean(rel)
		return s.eng.Denied("edit", rel) || rr.prefix != "" && rr.prefix != "." && s.eng.Denied("edit", path.Join(rr.prefix, rel))
	}
}

// vcsErr maps a failure of the project's git.
func (s *Server) vcsErr(err error, dir string) *apiError {
	switch {
	case errors.Is(err, workspace.ErrDiffTooLarge):
		return &apiError{status: http.StatusRequestEntityTooLarge, name: "PayloadTooLargeError", msg: err.Error() + "; GET /vcs/diff lists it file by file"}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &apiError{status: http.StatusServiceUnavailable, name: "RequestCancelledError", msg: "git in " + dir + " did not answer in time"}
	}
	s.log.Warn("vcs", "directory", dir, "err", err)
	return &apiError{status: http.StatusInternalServerError, name: "UnknownError", msg: "git in " + dir + " failed: " + err.Error()}
}
