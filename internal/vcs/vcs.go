// Package vcs answers the questions agentd asks of a directory's version
// control: which git repository holds it, on which branch, and which is
// the default branch. It reads .git itself instead of running git.
package vcs

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Root returns the root of the git repository holding dir, and false when
// dir is in none.
func Root(dir string) (string, bool) {
	for d := filepath.Clean(dir); ; {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d, true
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", false
		}
		d = parent
	}
}

// Branch returns the checked-out branch of the repository at root, or ""
// when there is none (not a repository, detached head).
func Branch(root string) string {
	gitDir := filepath.Join(root, ".git")
	if b, err := os.ReadFile(gitDir); err == nil {
		// A worktree or submodule: .git is a file naming the git dir.
		if d, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:"); ok {
			gitDir = strings.TrimSpace(d)
			if !filepath.IsAbs(gitDir) {
				gitDir = filepath.Join(root, gitDir)
			}
		}
	}
	head, err := os.ReadFile(filepath.Join(gitDir, "HEAD"))
	if err != nil {
		return ""
	}
	ref, ok := strings.CutPrefix(strings.TrimSpace(string(head)), "ref: refs/heads/")
	if !ok {
		return ""
	}
	return ref
}

// DefaultBranch returns the repository's default branch at root, as
// opencode finds it: the branch origin's (or upstream's) HEAD names, else
// a local main or master; "" when there is none. name is the branch's
// name, ref what git resolves it by (origin/main, or main).
func DefaultBranch(root string) (name, ref string) {
	common := commonDir(root)
	if common == "" {
		return "", ""
	}
	for _, remote := range []string{"origin", "upstream"} {
		b, err := readSmall(filepath.Join(common, "refs", "remotes", remote, "HEAD"))
		target, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "ref: refs/remotes/"+remote+"/")
		if err == nil && ok && target != "" {
			return target, remote + "/" + target
		}
	}
	packed, _ := readSmall(filepath.Join(common, "packed-refs"))
	for _, b := range []string{"main", "master"} {
		if _, err := os.Stat(filepath.Join(common, "refs", "heads", b)); err == nil ||
			strings.Contains(string(packed), " refs/heads/"+b+"\n") {
			return b, b
		}
	}
	return "", ""
}

// commonDir is the directory holding the repository's refs: .git, or
// for a linked work tree the one its git directory's commondir names.
func commonDir(root string) string {
	gitDir := filepath.Join(root, ".git")
	if st, err := os.Stat(gitDir); err != nil {
		return ""
	} else if !st.IsDir() {
		b, err := readSmall(gitDir)
		d, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
		if err != nil || !ok {
			return ""
		}
		gitDir = strings.TrimSpace(d)
		if !filepath.IsAbs(gitDir) {
			gitDir = filepath.Join(root, gitDir)
		}
	}
	if b, err := readSmall(filepath.Join(gitDir, "commondir")); err == nil {
		c := strings.TrimSpace(string(b))
		if !filepath.IsAbs(c) {
			c = filepath.Join(gitDir, c)
		}
		return c
	}
	return gitDir
}

// readSmall reads at most 1 MiB of a regular file, without waiting on a
// FIFO put in its place.
func readSmall(p string) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, os.ErrNotExist
	}
	return io.ReadAll(io.LimitReader(f, 1<<20))
}
