package server

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentd/agentd/internal/vcs"
	"github.com/agentd/agentd/internal/workspace"
)

// The file and search routes opencode's clients use (the TUI's @
// completion, the SDK's find and file calls), over a request's directory
// (internal/workspace). They read what the session's tools may read:
// inside the directory, and not what the operator's rules deny to read
// (readRules: on the path as it really is, relative to the directory and
// to the server's own).

// fileDir is the directory a file route reads: opencode's next API names
// it location[directory]; the others ?directory= or the header.
func (s *Server) fileDir(r *http.Request) (string, *apiError) {
	dir := r.URL.Query().Get("location[directory]")
	if dir == "" {
		var e *apiError
		if dir, e = s.directory(r); e != nil {
			return "", e
		}
	} else if !filepath.IsAbs(dir) {
		return "", badRequest("location[directory]: %q must be an absolute path", dir)
	}
	real, e := workspaceDir(filepath.Clean(dir))
	if e != nil {
		return "", e
	}
	// The directory itself, as the server's own rules see it.
	if rr := s.readRules(real); rr.prefix != "" && rr.prefix != "." && s.eng.Denied("read", rr.prefix) {
		return "", &apiError{status: http.StatusForbidden, name: "ForbiddenError", msg: "reading " + dir + " is denied by the operator's rules"}
	}
	return real, nil
}

// fileErr maps a workspace error.
func fileErr(err error, p string) *apiError {
	switch {
	case errors.Is(err, workspace.ErrDenied):
		return &apiError{status: http.StatusForbidden, name: "ForbiddenError", msg: "reading " + p + " is denied by the operator's rules"}
	case errors.Is(err, workspace.ErrOutside):
		return &apiError{status: http.StatusForbidden, name: "ForbiddenError", msg: "path " + p + " is outside the workspace"}
	case errors.Is(err, fs.ErrNotExist):
		return notFound("%s does not exist", p)
	default:
		return badRequest("%s: %v", p, err)
	}
}

// readRules are the operator's read rules as the file routes apply them
// in one directory: to a path as it really is (symlinks resolved, the
// directory's too), relative to the directory, and, when the directory is
// inside the server's own (where the rules were written), relative to
// that as well, so that ?directory= pointed inside a denied folder finds
// it denied all the same.
type readRules struct {
	s      *Server
	dir    string
	prefix string // dir relative to the server's directory; "" when outside it
}

func (s *Server) readRules(dir string) readRules {
	rr := readRules{s: s, dir: dir}
	if base, err := filepath.EvalSymlinks(s.cfg.Directory); err == nil && s.cfg.Directory != "" {
		if r, err := filepath.Rel(base, dir); err == nil && r != ".." && !strings.HasPrefix(r, "../") {
			rr.prefix = filepath.ToSlash(r)
		}
	}
	return rr
}

// denied reports whether reading rel (resolved, relative to the
// directory) is denied.
func (rr readRules) denied(rel string) bool {
	if rr.s.eng.Denied("read", rel) {
		return true
	}
	return rr.prefix != "" && rr.prefix != "." && rr.s.eng.Denied("read", path.Join(rr.prefix, rel))
}

// hidden reports whether a path a listing or search found (relative to
// the directory) is denied, by itself or where its links lead.
func (rr readRules) hidden(rel string) bool {
	rel = path.Clean(rel)
	if rr.denied(rel) {
		return true
	}
	real, ok := workspace.Resolved(rr.dir, rel)
	return ok && real != rel && rr.denied(real)
}

func (s *Server) listFiles(w http.ResponseWriter, r *http.Request) *apiError {
	dir, e := s.fileDir(r)
	if e != nil {
		return e
	}
	p := r.URL.Query().Get("path")
	nodes, err := workspace.List(dir, p, s.readRules(dir).denied)
	if err != nil {
		return fileErr(err, p)
	}
	writeJSON(w, http.StatusOK, nodes)
	return nil
}

func (s *Server) fileContent(w http.ResponseWriter, r *http.Request) *apiError {
	dir, e := s.fileDir(r)
	if e != nil {
		return e
	}
	p := r.URL.Query().Get("path")
	if p == "" {
		return badRequest("path: required")
	}
	c, err := workspace.Read(dir, p, s.readRules(dir).denied)
	if err != nil {
		return fileErr(err, p)
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) fileStatus(w http.ResponseWriter, r *http.Request) *apiError {
	changes, e := s.visibleChanges(r)
	if e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, changes)
	return nil
}

// visibleChanges is the git status of the request's directory less the
// paths the operator's read rules hide there.
func (s *Server) visibleChanges(r *http.Request) ([]workspace.Change, *apiError) {
	dir, e := s.fileDir(r)
	if e != nil {
		return nil, e
	}
	changes, err := workspace.Status(r.Context(), dir)
	if err != nil {
		return nil, fileErr(err, dir)
	}
	// git names paths from the repository's root.
	rr, root := s.readRules(dir), dir
	if rt, ok := vcs.Root(dir); ok {
		root = rt
	}
	out := changes[:0]
	for _, c := range changes {
		if rel, err := filepath.Rel(dir, filepath.Join(root, c.Path)); err != nil || !rr.hidden(filepath.ToSlash(rel)) {
			out = append(out, c)
		}
	}
	return out, nil
}

// searchLimit reads ?limit= (1 to 200, default def).
func searchLimit(r *http.Request, def int) (int, *apiError) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, badRequest("limit: %q is not a positive integer", v)
	}
	return min(n, 200), nil
}

func (s *Server) findFiles(w http.ResponseWriter, r *http.Request) *apiError {
	// opencode's default: ten.
	entries, e := s.searchFiles(r, 10)
	if e != nil {
		return e
	}
	paths := make([]string, len(entries))
	for i, en := range entries {
		paths[i] = en.Path
	}
	writeJSON(w, http.StatusOK, paths)
	return nil
}

// searchFiles is the fuzzy search of both routes: files and folders
// (?type= keeps one kind; ?dirs=false files only), at most ?limit=
// (default defaultLimit), what the read rules deny left out.
func (s *Server) searchFiles(r *http.Request, defaultLimit int) ([]workspace.Entry, *apiError) {
	dir, e := s.fileDir(r)
	if e != nil {
		return nil, e
	}
	q := r.URL.Query()
	limit, e := searchLimit(r, defaultLimit)
	if e != nil {
		return nil, e
	}
	typ := q.Get("type")
	if typ != "" && typ != workspace.TypeFile && typ != workspace.TypeDir {
		return nil, badRequest("type: %q is not file or directory", typ)
	}
	entries, err := s.findEntries(r.Context(), dir, q.Get("query"), q.Get("dirs") != "false", typ, limit)
	if err != nil {
		return nil, fileErr(err, dir)
	}
	return entries, nil
}

// findEntries is a fuzzy search of dir (a real path), without what the
// operator's rules deny to read: folders too when dirs is set, one kind
// when typ names it (opencode's @ completion, in both APIs).
func (s *Server) findEntries(ctx context.Context, dir, query string, dirs bool, typ string, limit int) ([]workspace.Entry, error) {
	if typ == "" && !dirs {
		typ = workspace.TypeFile
	}
	return workspace.Files(ctx, dir, query, typ, limit, s.hiddenIn(dir))
}

func (s *Server) findText(w http.ResponseWriter, r *http.Request) *apiError {
	dir, e := s.fileDir(r)
	if e != nil {
		return e
	}
	pattern := r.URL.Query().Get("pattern")
	if pattern == "" {
		return badRequest("pattern: required")
	}
	matches, err := workspace.Grep(r.Context(), dir, pattern)
	if err != nil {
		return badRequest("pattern %q: %v", pattern, err)
	}
	rr := s.readRules(dir)
	out := matches[:0]
	for _, m := range matches {
		if !rr.hidden(m.Path.Text) {
			out = append(out, m)
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// findSymbol answers no symbols: agentd runs no language server.
func (s *Server) findSymbol(w http.ResponseWriter, r *http.Request) *apiError {
	if _, e := s.fileDir(r); e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, []struct{}{})
	return nil
}
