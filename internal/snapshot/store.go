package snapshot

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
)

// The files of a store's git directory that git reads as configuration
// or rules, with what agentd writes there. checkConfig puts them back
// before every use: a changed configuration (a filter, a hook, an
// fsmonitor) never reaches a git process.
var storeFiles = []struct{ name, body string }{
	{"config", storeConfig()},
	// Highest precedence of all attributes: none of the workspace's
	// .gitattributes (which the model writes) names a filter or a diff
	// driver, or converts line endings, for any file.
	{"info/attributes", "* !filter !diff !merge !text !crlf !eol !ident !working-tree-encoding\n"},
	// The old store inside the workspace, and what no project wants
	// snapshotted.
	{"info/exclude", "/" + OldDir + "/\n" + OldDir + "/\nnode_modules/\n.git\n"},
}

// storeConfig is a store's configuration: a repository with its work tree
// elsewhere (GIT_WORK_TREE), that converts nothing, runs nothing and
// never collects garbage on its own.
func storeConfig() string {
	ignoreCase := runtime.GOOS == "darwin" || runtime.GOOS == "windows"
	return fmt.Sprintf(`# Written by agentd: any change is undone before git runs here.
[core]
	repositoryformatversion = 0
	bare = false
	filemode = true
	symlinks = true
	ignorecase = %t
	autocrlf = false
	quotepath = false
	fsmonitor = false
	untrackedCache = false
	hooksPath = /dev/null
	attributesFile = /dev/null
	logAllRefUpdates = false
[gc]
	auto = 0
[maintenance]
	auto = false
`, ignoreCase)
}

// create makes a store's git directory when it does not exist (private
// to this user), with the layout git recognises: HEAD, objects, refs.
func create(w *workspace) error {
	if err := os.MkdirAll(filepath.Dir(w.gitDir), 0o700); err != nil {
		return err
	}
	if err := os.Mkdir(w.gitDir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	st, err := os.Lstat(w.gitDir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", w.gitDir)
	}
	for _, d := range []string{"objects", "refs", "info"} {
		if err := os.MkdirAll(filepath.Join(w.gitDir, d), 0o700); err != nil {
			return err
		}
	}
	if _, err := os.Lstat(filepath.Join(w.gitDir, "HEAD")); errors.Is(err, fs.ErrNotExist) {
		if err := os.WriteFile(filepath.Join(w.gitDir, "HEAD"), []byte("ref: refs/heads/main\n"), 0o600); err != nil {
			return err
		}
		// Which workspace a store is, for an operator looking at the
		// folder (git does not read it).
		_ = os.WriteFile(filepath.Join(w.gitDir, "workspace"), []byte(w.dir+"\n"), 0o600)
	}
	return nil
}

// checkConfig rewrites each of the store's files that differs from
// agentd's, and removes those that would make git read configuration
// elsewhere (commondir: another git directory's config).
func checkConfig(gitDir string) error {
	for _, f := range storeFiles {
		p := filepath.Join(gitDir, f.name)
		if b, err := readRegular(p); err == nil && bytes.Equal(b, []byte(f.body)) {
			continue
		}
		if err := writeAtomic(p, []byte(f.body)); err != nil {
			return fmt.Errorf("snapshot store %s: %w", f.name, err)
		}
	}
	for _, name := range []string{"commondir", "config.worktree"} {
		if err := os.RemoveAll(filepath.Join(gitDir, name)); err != nil {
			return fmt.Errorf("snapshot store %s: %w", name, err)
		}
	}
	return nil
}

// readRegular reads a small regular file, without following a link or
// waiting on a FIFO; anything else at p is removed, to be rewritten.
func readRegular(p string) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			_ = os.RemoveAll(p)
		}
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Size() > 64<<10 {
		_ = os.RemoveAll(p)
		return nil, fmt.Errorf("%s: not a small regular file", p)
	}
	return io.ReadAll(f)
}

// writeAtomic replaces p with body: a git starting meanwhile reads the
// old file or the new one, never half of one, and a link at p is
// replaced, not followed.
func writeAtomic(p string, body []byte) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".agentd-*")
	if err != nil {
		return err
	}
	_, werr := f.Write(body)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(f.Name(), p)
	}
	if werr != nil {
		_ = os.Remove(f.Name())
	}
	return werr
}
