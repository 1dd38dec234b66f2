package server

import (
	"context"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/safegit"
	"github.com/agentd/agentd/internal/skill"
	"github.com/agentd/agentd/internal/store"
	gitwt "github.com/agentd/agentd/internal/worktree"
)

// Projects, their directories and worktrees, as opencode's clients ask
// for them: the TUI's /move (project copies: the repository's worktrees),
// the web app's worktrees (/experimental/worktree), and moving a session
// to another directory of its repository. agentd keeps no project
// records: a project is the git repository of a directory, its id
// "global", and its directories are the repository's worktrees. agentd
// makes and removes only the worktrees it made (package worktree).

// projectRoutes are this file's routes and GET /skill (skills.go).
func (s *Server) projectRoutes() []route {
	return []route{
		{"GET", "/skill", "Skills of the request's directory: SKILL.md files of its project folders and the user's.", false, s.listSkills},
		{"GET", "/project", "Projects: the server directory's and those of the sessions' directories.", false, s.listProjects},
		{"PATCH", "/project/{projectID}", "Update a project: refused, agentd keeps no project records (a project is its repository).", false, s.updateProject},
		{"POST", "/project/git/init", "Make the request's directory a git repository (no hooks, no template); answers its project.", false, s.initGit},
		{"POST", "/experimental/project/{projectID}/copy", "Make a copy of the request's repository: a git worktree on a branch of its own, in agentd's worktree folder.", false, s.createCopy},
		{"DELETE", "/experimental/project/{projectID}/copy", "Remove a copy agentd made (its changes only with force; never while a session runs in it).", false, s.removeCopy},
		{"POST", "/experimental/project/{projectID}/copy/refresh", "Refresh the project's directories (they are read from git each time).", false, s.refreshCopies},
		{"POST", "/experimental/project/{projectID}/copy/generate-name", "A short made-up name for a new copy.", false, s.copyName},
		{"GET", "/experimental/worktree", "The worktrees agentd made for the request's repository.", false, s.listWorktrees},
		{"POST", "/experimental/worktree", "Make a git worktree of the request's repository on a new branch agentd/<name>.", false, s.createWorktree},
		{"DELETE", "/experimental/worktree", "Remove a worktree agentd made, and its branch unless it holds commits HEAD does not.", false, s.removeWorktree},
		{"POST", "/experimental/worktree/reset", "Reset a worktree agentd made to the default branch (changes and untracked files deleted).", false, s.resetWorktree},
		{"POST", "/experimental/control-plane/move-session", "Move an idle session to another directory of its repository (a worktree).", false, s.moveSession},
	}
}

// projectDirJSON is one directory of GET /project/{projectID}/directories:
// strategy is set on the copies agentd made (which it can remove).
type projectDirJSON struct {
	Directory string `json:"directory"`
	Strategy  string `json:"strategy,omitempty"`
}

// copyStrategy is the one way agentd copies a project.
const copyStrategy = "git_worktree"

// projectID checks a route's project id: every project of agentd's is
// "global" (the repository of the request's directory).
func projectID(r *http.Request) *apiError {
	if id := r.PathValue("projectID"); id != "global" {
		return notFound("project %q not found: agentd's projects are all \"global\", the repository of the request's directory", id)
	}
	return nil
}

// locationDir is the directory of a request of opencode's next API
// (?location[directory]=), else its ?directory or header, else the
// server's.
func (s *Server) locationDir(r *http.Request) (string, *apiError) {
	dir := r.URL.Query().Get("location[directory]")
	if dir == "" {
		return s.directory(r)
	}
	if !filepath.IsAbs(dir) || strings.ContainsRune(dir, 0) {
		return "", badRequest("location[directory]: %q must be an absolute path", dir)
	}
	return filepath.Clean(dir), nil
}

func (s *Server) projectDirectories(w http.ResponseWriter, r *http.Request) *apiError {
	if e := projectID(r); e != nil {
		return e
	}
	dir, e := s.directory(r)
	if e != nil {
		return e
	}
	repo, err := gitwt.Open(dir)
	if err != nil {
		writeJSON(w, http.StatusOK, []projectDirJSON{{Directory: worktreeOr(dir)}})
		return nil
	}
	out := []projectDirJSON{{Directory: repo.Root}}
	for _, wt := range s.worktrees(repo) {
		d := projectDirJSON{Directory: wt.Directory}
		if wt.Managed {
			d.Strategy = copyStrategy
		}
		out = append(out, d)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// worktreeOr is the root of dir's repository, or dir outside one.
func worktreeOr(dir string) string {
	if root := worktree(dir); root != "/" {
		return root
	}
	return dir
}

// worktrees lists repo's linked worktrees (none when they cannot be
// read).
func (s *Server) worktrees(repo gitwt.Repo) []gitwt.Worktree {
	list, err := s.cfg.Worktrees.List(repo)
	if err != nil {
		s.log.Warn("list worktrees", "repo", repo.Root, "err", err)
	}
	return list
}

// sandboxes are the directories of the worktrees agentd made for the
// repository at root (opencode's project sandboxes).
func (s *Server) sandboxes(root string) []string {
	out := []string{}
	repo, err := gitwt.Open(root)
	if err != nil {
		return out
	}
	for _, wt := range s.worktrees(repo) {
		if wt.Managed {
			out = append(out, wt.Directory)
		}
	}
	return out
}

func (s *Server) listProjects(w http.ResponseWriter, r *http.Request) *apiError {
	sessions, err := s.st.Sessions(r.Context(), store.SessionQuery{})
	if err != nil {
		return s.storeErr(err, "sessions")
	}
	started := s.started.UnixMilli()
	byRoot := map[string]*projectJSON{}
	add := func(dir string, created, updated int64) {
		root := worktree(dir)
		if real, err := gitwt.Open(dir); err == nil {
			root = real.Root // a linked worktree's project is its repository's
		}
		p, ok := byRoot[root]
		if !ok {
			p = &projectJSON{ID: "global", Worktree: root, Sandboxes: s.sandboxes(root),
				Time: projectTime{Created: created, Updated: updated}}
			if root != "/" {
				p.VCS, p.Name = "git", filepath.Base(root)
			}
			byRoot[root] = p
		}
		p.Time.Created, p.Time.Updated = min(p.Time.Created, created), max(p.Time.Updated, updated)
	}
	add(s.cfg.Directory, started, started)
	for _, sess := range sessions {
		add(sess.Directory, sess.Time.Created, sess.Time.Updated)
	}
	out := make([]projectJSON, 0, len(byRoot))
	for _, p := range byRoot {
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Time.Updated > out[j].Time.Updated })
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) updateProject(w http.ResponseWriter, r *http.Request) *apiError {
	if e := projectID(r); e != nil {
		return e
	}
	return badRequest("agentd keeps no project records: a project is the git repository of a directory, named after its folder; its name, icon and start command cannot be changed here")
}

// initGit makes the request's directory a git repository when it is in
// none: git init with an empty template (no sample hooks), the initial
// branch main, through safegit.
func (s *Server) initGit(w http.ResponseWriter, r *http.Request) *apiError {
	dir, e := s.directory(r)
	if e != nil {
		return e
	}
	if dir, e = workspaceDir(dir); e != nil {
		return e
	}
	if worktree(dir) == "/" {
		c := safegit.Cmd{Dir: dir, Args: []string{"-c", "init.defaultBranch=main", "init", "--quiet", "--template="}}
		if _, err := safegit.Output(r.Context(), c); err != nil {
			return badRequest("git init in %s: %v", dir, err)
		}
	}
	p := projectJSON{ID: "global", Worktree: dir, VCS: "git", Name: filepath.Base(dir), Sandboxes: s.sandboxes(dir),
		Time: projectTime{Created: s.started.UnixMilli(), Updated: time.Now().UnixMilli()}}
	if root := worktree(dir); root != "/" {
		p.Worktree, p.Name = root, filepath.Base(root)
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

// busyIn names a session with a run in progress whose directory is dir or
// below it.
func (s *Server) busyIn(ctx context.Context, dir string) (string, error) {
	runs, err := s.st.ActiveRuns(ctx, "")
	if err != nil {
		return "", err
	}
	dir = filepath.Clean(dir)
	for _, run := range runs {
		d := filepath.Clean(s.sessionDir(ctx, run.SessionID))
		if d == dir || strings.HasPrefix(d, dir+string(filepath.Separator)) {
			return run.SessionID, nil
		}
	}
	return "", nil
}

// forgetSessionDir drops the cached directory of a session that moved.
func (s *Server) forgetSessionDir(id string) {
	s.dirs.mu.Lock()
	delete(s.dirs.m, id)
	s.dirs.mu.Unlock()
}

// projectOps document projectRoutes.
func projectOps() map[string]op {
	return map[string]op{
		"GET /skill":                                                {resp: []skill.Skill{}},
		"GET /project":                                              {resp: []projectJSON{}},
		"PATCH /project/{projectID}":                                {body: map[string]any{}, status: http.StatusBadRequest},
		"POST /project/git/init":                                    {resp: projectJSON{}},
		"POST /experimental/project/{projectID}/copy":               {body: copyCreateBody{}, resp: copyJSON{}, query: []param{qLocation}},
		"DELETE /experimental/project/{projectID}/copy":             {body: copyRemoveBody{}, status: http.StatusNoContent, query: []param{qLocation}},
		"POST /experimental/project/{projectID}/copy/refresh":       {status: http.StatusNoContent, query: []param{qLocation}},
		"POST /experimental/project/{projectID}/copy/generate-name": {body: copyNameBody{}, resp: copyNameJSON{}},
		"GET /experimental/worktree":                                {resp: []string{}},
		"POST /experimental/worktree":                               {body: worktreeCreateBody{}, resp: gitwt.Worktree{}},
		"DELETE /experimental/worktree":                             {body: worktreeDirBody{}, resp: true},
		"POST /experimental/worktree/reset":                         {body: worktreeDirBody{}, resp: true},
		"POST /experimental/control-plane/move-session":             {body: moveSessionBody{}, status: http.StatusNoContent},
	}
}
