// Package worktree makes, lists, resets and removes the git worktrees
// agentd keeps for a project's repository, so that sessions working in
// parallel on one repository each have a checkout of their own (opencode's
// /experimental/worktree routes and the TUI's project copies).
//
// git never reads the project's configuration here: the model can write
// .git/config, and a filter, hook or fsmonitor named there would run with
// any git agentd starts in the repository. So agentd does what
// `git worktree add` does by hand: it writes the worktree's administrative
// files (.git/worktrees/<name>: gitdir, commondir, HEAD) and the
// worktree's .git file itself, creates the branch, and checks the files
// out with a git that runs against a private git directory of agentd's
// (safegit.Project): the project's objects, refs and the new index, no
// configuration of the project's but plain values. Every git goes through
// internal/safegit: an allow-listed environment, no system or global
// configuration, hooks off. The result is an ordinary linked worktree:
// the user's own git lists, uses and prunes it.
//
// Filters named by .gitattributes (Git LFS's among them) do not run, so a
// worktree holds such files as they are stored in the repository.
package worktree

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentd/agentd/internal/smallfile"
	"github.com/agentd/agentd/internal/vcs"
)

// Errors the callers tell apart.
var (
	// ErrNotGit: the directory is in no git repository agentd can use.
	ErrNotGit = errors.New("not in a git repository")
	// ErrDirty: a worktree to remove holds changes (remove it with force).
	ErrDirty = errors.New("the worktree has uncommitted changes or untracked files")
	// ErrNotFound: the directory is no worktree of agentd's in the
	// repository (agentd removes and resets only the worktrees it made).
	ErrNotFound = errors.New("not a worktree agentd made for this repository")
	// ErrNoCommit: the repository has no commit to check out.
	ErrNoCommit = errors.New("the repository has no commit yet")
)

// Repo is a repository as Open finds it.
type Repo struct {
	// Root is the main worktree.
	Root string
	// Common is the repository's git directory (Root/.git), which holds
	// the objects, refs and the linked worktrees' administrative folders.
	Common string
}

// Open returns the repository of dir: the one whose main worktree holds
// dir, or whose linked worktree (one that git or agentd made: its
// administrative folder names it back) holds dir. A repository whose .git
// is a link, or whose git directory is elsewhere than its main worktree's
// .git (a submodule, --separate-git-dir), is refused: agentd writes into
// it, and will not where the project's own files point.
func Open(dir string) (Repo, error) {
	root, ok := vcs.Root(dir)
	if !ok {
		return Repo{}, ErrNotGit
	}
	root = filepath.Clean(root)
	dotGit := filepath.Join(root, ".git")
	st, err := os.Lstat(dotGit)
	if err != nil {
		return Repo{}, ErrNotGit
	}
	if st.IsDir() {
		return Repo{Root: root, Common: dotGit}, nil
	}
	if !st.Mode().IsRegular() {
		return Repo{}, fmt.Errorf("%s is a link: %w", dotGit, ErrNotGit)
	}
	admin, err := gitdirOf(dotGit)
	if err != nil {
		return Repo{}, err
	}
	common := filepath.Dir(filepath.Dir(admin))
	if filepath.Base(filepath.Dir(admin)) != "worktrees" || filepath.Base(common) != ".git" {
		return Repo{}, fmt.Errorf("%s names %s, which is not a linked worktree's folder: %w", dotGit, admin, ErrNotGit)
	}
	back, err := smallfile.ReadNoFollow(filepath.Join(admin, "gitdir"))
	if err != nil || filepath.Clean(strings.TrimSpace(string(back))) != dotGit {
		return Repo{}, fmt.Errorf("%s does not name %s back: %w", admin, dotGit, ErrNotGit)
	}
	if st, err := os.Lstat(common); err != nil || !st.IsDir() {
		return Repo{}, ErrNotGit
	}
	return Repo{Root: filepath.Dir(common), Common: common}, nil
}

// gitdirOf reads the administrative folder a .git file names.
func gitdirOf(dotGit string) (string, error) {
	b, err := smallfile.ReadNoFollow(dotGit)
	if err != nil {
		return "", fmt.Errorf("%s: %w", dotGit, ErrNotGit)
	}
	d, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
	if !ok {
		return "", fmt.Errorf("%s names no git directory: %w", dotGit, ErrNotGit)
	}
	d = strings.TrimSpace(d)
	if !filepath.IsAbs(d) {
		d = filepath.Join(filepath.Dir(dotGit), d)
	}
	return filepath.Clean(d), nil
}

// real returns p with its symlinks resolved (p itself when that fails).
func real(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return filepath.Clean(p)
}

// Admin returns the administrative folder, in its repository's .git, of
// the linked worktree whose root is root, once Open has accepted it.
func Admin(root string) (string, error) {
	return gitdirOf(filepath.Join(root, ".git"))
}
