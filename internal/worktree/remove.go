package worktree

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentd/agentd/internal/safegit"
)

// Removal says what Remove did with the worktree's branch.
type Removal struct {
	// Branch is the worktree's branch; KeptBranch is set when it holds
	// commits the main worktree's HEAD does not, and so was kept.
	Branch     string
	KeptBranch bool
}

// Remove deletes the worktree agentd made at dir: its files, its
// administrative folder, and its branch unless the branch holds commits
// that the main worktree's HEAD does not (those are never lost). A
// worktree with changes is removed only with force (ErrDirty otherwise).
func (m *Manager) Remove(ctx context.Context, repo Repo, dir string, force bool) (Removal, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	w, err := m.find(repo, dir)
	if err != nil {
		return Removal{}, err
	}
	if !force {
		dirty, err := Dirty(ctx, w.Directory)
		if err != nil {
			return Removal{}, err
		}
		if dirty {
			return Removal{}, fmt.Errorf("%s: %w", w.Directory, ErrDirty)
		}
	}
	// The folder goes first: a worktree whose administrative folder
	// is gone but whose files remain would read as a broken checkout.
	if err := os.RemoveAll(w.Directory); err != nil {
		return Removal{}, fmt.Errorf("remove %s: %w", w.Directory, err)
	}
	if err := os.RemoveAll(w.admin); err != nil {
		return Removal{}, fmt.Errorf("remove %s: %w", w.admin, err)
	}
	rm := Removal{Branch: w.Branch}
	if w.Branch != "" {
		rm.KeptBranch = !deleteBranch(ctx, repo, w.Branch)
	}
	return rm, nil
}

// deleteBranch deletes branch when the main worktree's HEAD holds all its
// commits, and reports whether it did. Only a loose ref is deleted: the
// private git directory reaches packed-refs through a link that git would
// replace rather than rewrite.
func deleteBranch(ctx context.Context, repo Repo, branch string) bool {
	ref := "refs/heads/" + branch
	if st, err := os.Lstat(filepath.Join(repo.Common, filepath.FromSlash(ref))); err != nil || !st.Mode().IsRegular() {
		return false
	}
	main, err := safegit.Project(ctx, repo.Root)
	if err != nil {
		return false
	}
	defer main.Close()
	out, err := safegit.Output(ctx, main.Cmd(repo.Root, "rev-parse", "--verify", "--quiet", ref))
	if err != nil {
		return false
	}
	tip := strings.TrimSpace(string(out))
	if _, err := safegit.Output(ctx, main.Cmd(repo.Root, "merge-base", "--is-ancestor", tip, "HEAD")); err != nil {
		return false
	}
	_, err = safegit.Output(ctx, main.Cmd(repo.Root, "update-ref", "-d", ref, tip))
	return err == nil
}

// Reset brings the worktree agentd made at dir back to the repository's
// default branch (main or master, else the main worktree's HEAD): its
// branch points there, its files are checked out again and files git
// does not track are deleted (ignored ones too, as opencode does).
func (m *Manager) Reset(ctx context.Context, repo Repo, dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	w, err := m.find(repo, dir)
	if err != nil {
		return err
	}
	main, err := safegit.Project(ctx, repo.Root)
	if err != nil {
		return fmt.Errorf("open %s: %w", repo.Root, err)
	}
	defer main.Close()
	var sha string
	for _, ref := range []string{"refs/heads/main", "refs/heads/master", "HEAD"} {
		if out, err := safegit.Output(ctx, main.Cmd(repo.Root, "rev-parse", "--verify", "--quiet", ref+"^{commit}")); err == nil {
			sha = strings.TrimSpace(string(out))
			break
		}
	}
	if sha == "" {
		return ErrNoCommit
	}
	if w.Branch != "" {
		ref := "refs/heads/" + w.Branch
		if _, err := safegit.Output(ctx, main.Cmd(repo.Root, "update-ref", "--no-deref", ref, sha)); err != nil {
			return fmt.Errorf("reset branch %s: %w", w.Branch, err)
		}
	}
	if err := checkout(ctx, w.Directory, sha); err != nil {
		return err
	}
	r, err := safegit.Project(ctx, w.Directory)
	if err != nil {
		return fmt.Errorf("open worktree %s: %w", w.Directory, err)
	}
	defer r.Close()
	if _, err := safegit.Output(ctx, r.Cmd(w.Directory, "clean", "-ffdxq")); err != nil {
		return fmt.Errorf("clean %s: %w", w.Directory, err)
	}
	return nil
}
