package command

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/agentd/agentd/internal/vcs"
)

//go:embed builtin/*.md
var builtinFiles embed.FS

// Builtins are agentd's own commands: init (write or improve the
// project's AGENTS.md) and review (review the uncommitted changes), as
// opencode offers them.
func Builtins() Set {
	s := Set{}
	entries, _ := builtinFiles.ReadDir("builtin")
	for _, e := range entries {
		data, err := builtinFiles.ReadFile("builtin/" + e.Name())
		if err != nil {
			continue
		}
		c, err := Parse(strings.TrimSuffix(e.Name(), ".md"), data)
		if err != nil {
			panic("command: built-in " + e.Name() + ": " + err.Error())
		}
		s[c.Name] = c
	}
	return s
}

// ProjectFolders are the folders, relative to a directory and each of its
// parents up to its repository's root, whose command files are that
// directory's commands.
var ProjectFolders = []string{".opencode/command", ".opencode/commands", ".agentd/command"}

// Catalog resolves the commands of a session's directory: the built-in
// ones, then the files of the global folders, of the directory's project
// folders (the repository root's first, the directory's own last), and
// the configuration's, later ones winning. A directory's set is read
// again when a file of its folders changes, and dropped by Forget.
type Catalog struct {
	// Global are folders read for every directory.
	Global []string
	// Config are the configuration's commands.
	Config Set
	// Logger reports command files that cannot be read.
	Logger *slog.Logger

	mu    sync.Mutex
	cache map[string]catalogEntry
}

type catalogEntry struct {
	fingerprint string
	set         Set
}

// For returns the commands of directory dir.
func (c *Catalog) For(dir string) Set {
	folders := append(append([]string{}, c.Global...), ProjectDirs(dir)...)
	fp := fingerprint(folders)
	c.mu.Lock()
	e, ok := c.cache[dir]
	c.mu.Unlock()
	if ok && e.fingerprint == fp {
		return e.set
	}
	set := Builtins()
	for _, f := range folders {
		if err := set.LoadDir(f); err != nil && c.Logger != nil {
			c.Logger.Warn("command files skipped", "err", err)
		}
	}
	for name, cmd := range c.Config {
		set[name] = cmd
	}
	c.mu.Lock()
	if c.cache == nil || len(c.cache) > 1024 {
		c.cache = map[string]catalogEntry{}
	}
	c.cache[dir] = catalogEntry{fp, set}
	c.mu.Unlock()
	return set
}

// Forget drops what is cached for dir.
func (c *Catalog) Forget(dir string) {
	c.mu.Lock()
	delete(c.cache, dir)
	c.mu.Unlock()
}

// ProjectDirs are dir's command folders, from its repository's root (or
// dir alone outside one) down to dir.
func ProjectDirs(dir string) []string {
	if dir == "" {
		return nil
	}
	chain := []string{dir}
	if root, ok := vcs.Root(dir); ok {
		for d := dir; d != root && filepath.Dir(d) != d; {
			d = filepath.Dir(d)
			chain = append([]string{d}, chain...)
		}
	}
	var out []string
	for _, d := range chain {
		for _, f := range ProjectFolders {
			out = append(out, filepath.Join(d, f))
		}
	}
	return out
}

// fingerprint sums the names, sizes and times of the command files in
// folders, so that a change of any is seen.
func fingerprint(folders []string) string {
	h := sha256.New()
	for _, f := range folders {
		_ = filepath.WalkDir(f, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			if st, err := os.Stat(p); err == nil {
				fmt.Fprintf(h, "%s\x00%d\x00%d\n", p, st.Size(), st.ModTime().UnixNano())
			}
			return nil
		})
	}
	return hex.EncodeToString(h.Sum(nil))
}
