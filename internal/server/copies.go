package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
	gitwt "github.com/agentd/agentd/internal/worktree"
)

// copyCreateBody is POST /experimental/project/{projectID}/copy's request.
// agentd places the copy in its own worktree folder: the directory a
// client asks for (the TUI computes one under its own data folder) is not
// used, and the answer says where the copy is.
type copyCreateBody struct {
	Strategy  string `json:"strategy" doc:"required"`
	Directory string `json:"directory" doc:"required"`
	Name      string `json:"name"`
}

// copyJSON is the copy made.
type copyJSON struct {
	Directory string `json:"directory"`
}

// copyRemoveBody is DELETE /experimental/project/{projectID}/copy's
// request.
type copyRemoveBody struct {
	Directory string `json:"directory" doc:"required"`
	Force     bool   `json:"force" doc:"required"`
}

// copyNameBody and copyNameJSON are the request and answer of
// POST /experimental/project/{projectID}/copy/generate-name.
type copyNameBody struct {
	Context string `json:"context"`
}

type copyNameJSON struct {
	Name string `json:"name"`
}

// worktreeCreateBody, worktreeDirBody are opencode's WorktreeCreateInput,
// WorktreeRemoveInput and WorktreeResetInput.
type worktreeCreateBody struct {
	Name         string `json:"name"`
	StartCommand string `json:"startCommand"`
}

type worktreeDirBody struct {
	Directory string `json:"directory" doc:"required"`
}

// moveSessionBody is POST /experimental/control-plane/move-session's
// request.
type moveSessionBody struct {
	SessionID   string          `json:"sessionID" doc:"required"`
	Destination moveDestination `json:"destination" doc:"required"`
	MoveChanges bool            `json:"moveChanges"`
}

type moveDestination struct {
	Directory string `json:"directory" doc:"required"`
}

// copyError is opencode's ProjectCopyError; forceRequired tells the TUI
// to ask before removing a copy with changes.
func copyError(msg string, forceRequired bool) *apiError {
	data := map[string]any{"message": msg}
	if forceRequired {
		data["forceRequired"] = true
	}
	return &apiError{status: http.StatusBadRequest, name: "ProjectCopyError", msg: msg,
		body: map[string]any{"name": "ProjectCopyError", "data": data}}
}

// named is a 400 error of one of opencode's named shapes ({name, data:
// {message}}).
func named(name, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, name: name, msg: fmt.Sprintf(format, args...)}
}

// busyError names the session that keeps a worktree from being changed.
type busyError struct{ session, dir string }

func (e *busyError) Error() string {
	return fmt.Sprintf("session %s is running in %s: abort it or wait for it to end first", e.session, e.dir)
}

func (s *Server) createCopy(w http.ResponseWriter, r *http.Request) *apiError {
	if e := projectID(r); e != nil {
		return e
	}
	var in copyCreateBody
	if e := decodeJSON(r, &in, false); e != nil {
		return e
	}
	if in.Strategy != copyStrategy {
		return copyError(fmt.Sprintf("Project copy strategy unavailable: %q (agentd copies a project as a git worktree, %q)", in.Strategy, copyStrategy), false)
	}
	dir, e := s.locationDir(r)
	if e != nil {
		return e
	}
	repo, err := gitwt.Open(dir)
	if err != nil {
		return copyError(fmt.Sprintf("Project copy source not found: %s is not in a git repository (%v)", dir, err), false)
	}
	wt, err := s.cfg.Worktrees.Create(r.Context(), repo, in.Name)
	if err != nil {
		return copyError("Project copy failed: "+err.Error(), false)
	}
	writeJSON(w, http.StatusOK, copyJSON{Directory: wt.Directory})
	return nil
}

func (s *Server) removeCopy(w http.ResponseWriter, r *http.Request) *apiError {
	if e := projectID(r); e != nil {
		return e
	}
	var in copyRemoveBody
	if e := decodeJSON(r, &in, false); e != nil {
		return e
	}
	err := s.removeTree(r.Context(), in.Directory, in.Force)
	var busy *busyError
	switch {
	case err == nil:
		w.WriteHeader(http.StatusNoContent)
		return nil
	case errors.Is(err, gitwt.ErrDirty):
		return copyError("This copy has uncommitted changes or untracked files: "+in.Directory, true)
	case errors.Is(err, gitwt.ErrNotFound):
		return copyError("Invalid project copy directory: "+in.Directory+" is not a copy agentd made", false)
	case errors.As(err, &busy):
		return copyError(busy.Error(), false)
	}
	return copyError("Removing the project copy failed: "+err.Error(), false)
}

// removeTree removes the worktree agentd made at dir, unless a session
// is running in it.
func (s *Server) removeTree(ctx context.Context, dir string, force bool) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("%q: %w", dir, gitwt.ErrNotFound)
	}
	dir = filepath.Clean(dir)
	repo, err := gitwt.Open(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", dir, gitwt.ErrNotFound)
	}
	if err := s.notBusy(ctx, dir); err != nil {
		return err
	}
	rm, err := s.cfg.Worktrees.Remove(ctx, repo, dir, force)
	if err == nil && rm.KeptBranch {
		s.log.Info("worktree removed; its branch holds commits of its own and is kept", "dir", dir, "branch", rm.Branch)
	}
	return err
}

// notBusy returns a busyError when a session runs in dir.
func (s *Server) notBusy(ctx context.Context, dir string) error {
	id, err := s.busyIn(ctx, dir)
	if err != nil {
		return err
	}
	if id != "" {
		return &busyError{session: id, dir: dir}
	}
	return nil
}

func (s *Server) refreshCopies(w http.ResponseWriter, r *http.Request) *apiError {
	if e := projectID(r); e != nil {
		return e
	}
	if _, e := s.locationDir(r); e != nil {
		return e
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) copyName(w http.ResponseWriter, r *http.Request) *apiError {
	if e := projectID(r); e != nil {
		return e
	}
	var in copyNameBody
	if e := decodeJSON(r, &in, true); e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, copyNameJSON{Name: gitwt.RandomName()})
	return nil
}

func (s *Server) listWorktrees(w http.ResponseWriter, r *http.Request) *apiError {
	dir, e := s.directory(r)
	if e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, s.sandboxes(dir))
	return nil
}

func (s *Server) createWorktree(w http.ResponseWriter, r *http.Request) *apiError {
	var in worktreeCreateBody
	if e := decodeJSON(r, &in, true); e != nil {
		return e
	}
	if in.StartCommand != "" {
		return named("WorktreeStartCommandFailedError", "agentd runs no start command for a worktree: run it in a session (POST /session/{id}/shell), where the operator's rules and the sandbox apply")
	}
	dir, e := s.directory(r)
	if e != nil {
		return e
	}
	repo, err := gitwt.Open(dir)
	if err != nil {
		return named("WorktreeNotGitError", "Worktrees are only supported for git projects: %s (%v)", dir, err)
	}
	wt, err := s.cfg.Worktrees.Create(r.Context(), repo, in.Name)
	if err != nil {
		return named("WorktreeCreateFailedError", "%v", err)
	}
	writeJSON(w, http.StatusOK, wt)
	return nil
}

// removeWorktree removes a worktree agentd made with its changes, as
// opencode does; never while a session runs in it.
func (s *Server) removeWorktree(w http.ResponseWriter, r *http.Request) *apiError {
	var in worktreeDirBody
	if e := decodeJSON(r, &in, false); e != nil {
		return e
	}
	if err := s.removeTree(r.Context(), in.Directory, true); err != nil {
		return named("WorktreeRemoveFailedError", "%v", err)
	}
	writeJSON(w, http.StatusOK, true)
	return nil
}

func (s *Server) resetWorktree(w http.ResponseWriter, r *http.Request) *apiError {
	var in worktreeDirBody
	if e := decodeJSON(r, &in, false); e != nil {
		return e
	}
	dir := filepath.Clean(in.Directory)
	repo, err := gitwt.Open(dir)
	if err == nil {
		if err = s.notBusy(r.Context(), dir); err == nil {
			err = s.cfg.Worktrees.Reset(r.Context(), repo, dir)
		}
	}
	if err != nil {
		return named("WorktreeResetFailedError", "%v", err)
	}
	writeJSON(w, http.StatusOK, true)
	return nil
}

// moveSession moves an idle session to another directory of its
// repository (the TUI's /move): the session's next run works there. Its
// changes stay where they are (agentd moves none: moveChanges with
// changes is refused); a later revert restores the directory the session
// works in, never the one it left.
func (s *Server) moveSession(w http.ResponseWriter, r *http.Request) *apiError {
	var in moveSessionBody
	if e := decodeJSON(r, &in, false); e != nil {
		return e
	}
	sess, err := s.st.Session(r.Context(), in.SessionID)
	if errors.Is(err, store.ErrNotFound) || err == nil && !s.sees(r.Context(), sess.ID) {
		return named("MoveSessionError", "Session not found: %s", in.SessionID)
	}
	if err != nil {
		return s.storeErr(err, "session "+in.SessionID)
	}
	dest, e := workspaceDir(in.Destination.Directory)
	if e != nil {
		return named("MoveSessionError", "%s", e.msg)
	}
	if dest == sess.Directory {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	if e := s.canMove(r.Context(), sess, dest, in.MoveChanges); e != nil {
		return e
	}
	err = s.st.Tx(r.Context(), func(tx store.Tx) error {
		cur, err := tx.Session(r.Context(), sess.ID)
		if err != nil {
			return err
		}
		cur.Directory, cur.Time.Updated = dest, time.Now().UnixMilli()
		if err := tx.UpdateSession(r.Context(), cur); err != nil {
			return err
		}
		return tx.AppendEvent(r.Context(), core.MustEvent(cur.ID, core.EventSessionUpdated, core.SessionProps{SessionID: cur.ID, Info: cur}))
	})
	s.forgetSessionDir(sess.ID)
	if err != nil {
		return s.storeErr(err, "session "+sess.ID)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// canMove checks a move: the destination is in the session's repository,
// the session is idle and has no undone messages, and no changes are to
// be carried.
func (s *Server) canMove(ctx context.Context, sess core.Session, dest string, moveChanges bool) *apiError {
	from, err := gitwt.Open(sess.Directory)
	if err != nil {
		return named("MoveSessionError", "Source is not a git repository: %s", sess.Directory)
	}
	if to, err := gitwt.Open(dest); err != nil || to != from {
		return named("MoveSessionError", "Destination directory belongs to another project")
	}
	runs, err := s.st.ActiveRuns(ctx, sess.ID)
	if err != nil {
		return s.storeErr(err, "session "+sess.ID)
	}
	if len(runs) > 0 {
		return named("MoveSessionError", "the session is running (run %s): abort it or wait for it to end, then move it", runs[0].ID)
	}
	if sess.Revert != nil {
		return named("MoveSessionError", "the session has undone messages: send a prompt (or unrevert) before moving it")
	}
	if moveChanges {
		if dirty, err := gitwt.Dirty(ctx, worktreeOr(sess.Directory)); err != nil || dirty {
			return named("MoveSessionError", "agentd does not carry changes between directories: commit them (or move without them)")
		}
	}
	return nil
}
