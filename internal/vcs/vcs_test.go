package vcs

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDefaultBranch: origin's HEAD names it; else a local main or master,
// loose or packed; a linked work tree reads its common directory's refs;
// none without either.
func TestDefaultBranch(t *testing.T) {
	t.Parallel()
	write := func(p, body string) {
		t.Helper()
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root := t.TempDir()
	git := filepath.Join(root, ".git")
	write(filepath.Join(git, "HEAD"), "ref: refs/heads/feature\n")
	if n, r := DefaultBranch(root); n != "" || r != "" {
		t.Errorf("no branches: %q %q", n, r)
	}
	write(filepath.Join(git, "packed-refs"), "# pack-refs\nabc refs/heads/master\n")
	if n, r := DefaultBranch(root); n != "master" || r != "master" {
		t.Errorf("packed master: %q %q", n, r)
	}
	write(filepath.Join(git, "refs", "heads", "main"), "abc\n")
	if n, _ := DefaultBranch(root); n != "main" {
		t.Errorf("loose main: %q", n)
	}
	write(filepath.Join(git, "refs", "remotes", "origin", "HEAD"), "ref: refs/remotes/origin/trunk\n")
	if n, r := DefaultBranch(root); n != "trunk" || r != "origin/trunk" {
		t.Errorf("origin's HEAD: %q %q", n, r)
	}
	// A linked work tree: .git is a file; refs are in the common dir.
	wt := t.TempDir()
	wtGit := filepath.Join(git, "worktrees", "wt")
	write(filepath.Join(wt, ".git"), "gitdir: "+wtGit+"\n")
	write(filepath.Join(wtGit, "commondir"), "../..\n")
	write(filepath.Join(wtGit, "HEAD"), "ref: refs/heads/other\n")
	if n, _ := DefaultBranch(wt); n != "trunk" {
		t.Errorf("linked work tree: %q", n)
	}
	if Branch(wt) != "other" {
		t.Errorf("linked work tree's branch: %q", Branch(wt))
	}
}
