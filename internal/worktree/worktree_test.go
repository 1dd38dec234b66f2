package worktree

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/safegit"
	"github.com/agentd/agentd/internal/safegit/safegittest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main",
		"-c", "core.hooksPath=/dev/null"}, args...)...)
	cmd.Dir = dir
	cmd.Env = safegit.Env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v %s", args, err, out)
	}
	return string(out)
}

// repo makes a repository with one commit (a.txt, sub/b.txt).
func repo(t *testing.T) string {
	t.Helper()
	if !safegit.Available() {
		t.Skip("git is not installed")
	}
	dir := filepath.Join(t.TempDir(), "proj")
	os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "sub", "b.txt"), []byte("b\n"), 0o644)
	git(t, dir, "init", "-q")
	git(t, dir, "add", ".")
	git(t, dir, "commit", "-qm", "one")
	return dir
}

// TestCreateRunsNothingOfTheRepository: a repository whose configuration
// names hooks, filters, an fsmonitor and a pager, and whose attributes
// put every file through a filter, gets a worktree with its files checked
// out, its branch and git's administrative files; it is reset and
// removed; and none of those commands runs.
func TestCreateRunsNothingOfTheRepository(t *testing.T) {
	dir := repo(t)
	tr := safegittest.New(t)
	tr.WriteSide(t)
	t.Setenv(safegittest.SecretVar, "sk-secret")
	os.WriteFile(filepath.Join(dir, ".gitattributes"), []byte(tr.Attributes()), 0o644)
	git(t, dir, "add", ".gitattributes")
	git(t, dir, "commit", "-qm", "attributes")
	f, _ := os.OpenFile(filepath.Join(dir, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(tr.Config())
	f.Close()

	m := &Manager{Root: t.TempDir()}
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	w, err := m.Create(t.Context(), r, "Fix the Bug!")
	if err != nil {
		t.Fatal(err)
	}
	if w.Name != "fix-the-bug" || w.Branch != "agentd/fix-the-bug" || filepath.Dir(w.Directory) != m.Folder(r) {
		t.Errorf("worktree = %+v (folder %s)", w, m.Folder(r))
	}
	if b, _ := os.ReadFile(filepath.Join(w.Directory, "sub", "b.txt")); string(b) != "b\n" {
		t.Errorf("sub/b.txt = %q", b)
	}
	if dirty, err := Dirty(t.Context(), w.Directory); err != nil || dirty {
		t.Errorf("a new worktree is dirty (%v, %v)", dirty, err)
	}
	list, err := m.List(r)
	if err != nil || len(list) != 1 || !list[0].Managed || list[0].Branch != w.Branch {
		t.Errorf("List = %+v, %v", list, err)
	}
	// A directory in the worktree opens as the same repository.
	if r2, err := Open(filepath.Join(w.Directory, "sub")); err != nil || r2 != r {
		t.Errorf("Open(worktree) = %+v, %v; want %+v", r2, err, r)
	}
	os.WriteFile(filepath.Join(w.Directory, "a.txt"), []byte("changed\n"), 0o644)
	if err := m.Reset(t.Context(), r, w.Directory); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Remove(t.Context(), r, w.Directory, false); err != nil {
		t.Fatal(err)
	}
	tr.Check(t)
}

// TestWorktreeIsGits: git itself sees agentd's worktree as one of its
// own: listed, on its branch, clean, and gone once removed.
func TestWorktreeIsGits(t *testing.T) {
	t.Parallel()
	dir := repo(t)
	m := &Manager{Root: t.TempDir()}
	r, _ := Open(dir)
	w, err := m.Create(t.Context(), r, "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(git(t, dir, "worktree", "list", "--porcelain"), "worktree "+w.Directory+"\n") {
		t.Errorf("git worktree list lacks %s", w.Directory)
	}
	if st := git(t, w.Directory, "status", "--porcelain=v1", "--branch"); st != "## "+w.Branch+"\n" {
		t.Errorf("git status in the worktree = %q", st)
	}
	os.WriteFile(filepath.Join(w.Directory, "c.txt"), []byte("c\n"), 0o644)
	git(t, w.Directory, "add", "c.txt")
	git(t, w.Directory, "commit", "-qm", "two")
	if _, err := m.Remove(t.Context(), r, w.Directory, false); err != nil {
		t.Fatal(err)
	}
	if out := git(t, dir, "worktree", "list", "--porcelain"); strings.Contains(out, w.Directory) {
		t.Errorf("git still lists the removed worktree:\n%s", out)
	}
	// The branch held a commit of its own: it is kept.
	git(t, dir, "rev-parse", "--verify", "refs/heads/"+w.Branch)
}

// TestRemove: changes need force; a branch with nothing new is deleted;
// worktrees agentd did not make are refused.
func TestRemove(t *testing.T) {
	t.Parallel()
	dir := repo(t)
	m := &Manager{Root: t.TempDir()}
	r, _ := Open(dir)
	w, err := m.Create(t.Context(), r, "one")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(w.Directory, "new.txt"), []byte("x"), 0o644)
	if _, err := m.Remove(t.Context(), r, w.Directory, false); !errors.Is(err, ErrDirty) {
		t.Fatalf("Remove of a dirty worktree: %v", err)
	}
	rm, err := m.Remove(t.Context(), r, w.Directory, true)
	if err != nil || rm.KeptBranch {
		t.Fatalf("forced Remove = %+v, %v", rm, err)
	}
	if _, err := os.Stat(w.Directory); !os.IsNotExist(err) {
		t.Errorf("the worktree's folder is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(r.Common, "refs", "heads", "agentd", "one")); !os.IsNotExist(err) {
		t.Errorf("the branch with nothing new was kept: %v", err)
	}
	own := filepath.Join(t.TempDir(), "own")
	git(t, dir, "worktree", "add", "-q", own)
	if _, err := m.Remove(t.Context(), r, own, true); !errors.Is(err, ErrNotFound) {
		t.Errorf("Remove of the user's worktree: %v", err)
	}
	if _, err := m.Remove(t.Context(), r, dir, true); !errors.Is(err, ErrNotFound) {
		t.Errorf("Remove of the main worktree: %v", err)
	}
	if _, err := os.Stat(filepath.Join(own, "a.txt")); err != nil {
		t.Errorf("the user's worktree was touched: %v", err)
	}
}

// TestReset: a worktree's changes, untracked files and commits are undone.
func TestReset(t *testing.T) {
	t.Parallel()
	dir := repo(t)
	m := &Manager{Root: t.TempDir()}
	r, _ := Open(dir)
	w, err := m.Create(t.Context(), r, "r")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(w.Directory, "c.txt"), []byte("c\n"), 0o644)
	git(t, w.Directory, "add", "c.txt")
	git(t, w.Directory, "commit", "-qm", "two")
	os.WriteFile(filepath.Join(w.Directory, "a.txt"), []byte("changed\n"), 0o644)
	os.WriteFile(filepath.Join(w.Directory, "junk.txt"), []byte("junk\n"), 0o644)
	if err := m.Reset(t.Context(), r, w.Directory); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(w.Directory, "a.txt")); string(b) != "a\n" {
		t.Errorf("a.txt = %q", b)
	}
	for _, gone := range []string{"c.txt", "junk.txt"} {
		if _, err := os.Stat(filepath.Join(w.Directory, gone)); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", gone, err)
		}
	}
	if st := git(t, w.Directory, "status", "--porcelain=v1"); st != "" {
		t.Errorf("status after reset = %q", st)
	}
}

func TestOpenRefuses(t *testing.T) {
	t.Parallel()
	if _, err := Open(t.TempDir()); !errors.Is(err, ErrNotGit) {
		t.Errorf("Open outside a repository: %v", err)
	}
	// A .git file naming a folder that does not name it back.
	dir := t.TempDir()
	other := filepath.Join(t.TempDir(), ".git", "worktrees", "x")
	os.MkdirAll(other, 0o755)
	os.WriteFile(filepath.Join(other, "gitdir"), []byte("/elsewhere/.git\n"), 0o644)
	os.WriteFile(filepath.Join(dir, ".git"), []byte("gitdir: "+other+"\n"), 0o644)
	if _, err := Open(dir); !errors.Is(err, ErrNotGit) {
		t.Errorf("Open with a forged .git file: %v", err)
	}
	// A repository without a commit has nothing to check out.
	empty := t.TempDir()
	if safegit.Available() {
		git(t, empty, "init", "-q")
		r, _ := Open(empty)
		if _, err := (&Manager{Root: t.TempDir()}).Create(t.Context(), r, ""); !errors.Is(err, ErrNoCommit) {
			t.Errorf("Create without a commit: %v", err)
		}
	}
}

// BenchmarkCreateRemove measures making and removing a worktree of a
// small repository (two files): the git processes agentd starts.
func BenchmarkCreateRemove(b *testing.B) {
	if !safegit.Available() {
		b.Skip("git is not installed")
	}
	dir := filepath.Join(b.TempDir(), "proj")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a\n"), 0o644)
	for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"commit", "-qm", "one"}} {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "core.hooksPath=/dev/null"}, args...)...)
		cmd.Dir, cmd.Env = dir, safegit.Env()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	m := &Manager{Root: b.TempDir()}
	r, err := Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		w, err := m.Create(b.Context(), r, "bench")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := m.Remove(b.Context(), r, w.Directory, false); err != nil {
			b.Fatal(err)
		}
	}
}
