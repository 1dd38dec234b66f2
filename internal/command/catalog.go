package command

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
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

// DefaultProjectAgents are the agents a project command file may name
// when the operator says nothing (Catalog.ProjectAgents nil).
var DefaultProjectAgents = []string{"build", "plan"}

// Catalog resolves the commands of a session's directory: the built-in
// ones, then the files of the global folders, then the configuration's
// (later ones winning), then the files of the directory's project folders
// (the repository root's first, the directory's own last) under the names
// still free. A project's files are the model's to write, so they add
// commands but never replace one: a project review.md does not become
// /review. A directory's set is read again when a file of its folders
// changes, and dropped by Forget.
type Catalog struct {
	// Global are folders read for every directory.
	Global []string
	// Config are the configuration's commands.
	Config Set
	// ProjectAgents are the agents a project's command file may name (nil:
	// DefaultProjectAgents; empty: none). An operator's agent with wider
	// permissions stays out of reach of a file the model wrote.
	ProjectAgents []string
	// Logger reports command files that cannot be read or are ignored.
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
	folders := c.folders(dir)
	fp := fingerprint(folders)
	c.mu.Lock()
	e, ok := c.cache[dir]
	c.mu.Unlock()
	if ok && e.fingerprint == fp {
		return e.set
	}
	set := Builtins()
	for _, f := range c.Global {
		c.warn(set.LoadDir(f))
	}
	for name, cmd := range c.Config {
		set[name] = cmd
	}
	project := Set{}
	c.warn(project.LoadProject(dir))
	for name, cmd := range project {
		if _, taken := set[name]; taken {
			if c.Logger != nil {
				c.Logger.Warn("project command file ignored: it would replace a built-in, global or configured command", "command", name, "dir", dir)
			}
			continue
		}
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

func (c *Catalog) warn(err error) {
	if err != nil && c.Logger != nil {
		c.Logger.Warn("command files skipped", "err", err)
	}
}

// ErrAgentNotAllowed is returned by Agent for a project command that
// names an agent project commands may not use.
var ErrAgentNotAllowed = errors.New("project commands may not use this agent")

// Agent returns the agent a command runs with when the request names
// none: the command's own, which for a project command must be one of
// ProjectAgents.
func (c *Catalog) Agent(cmd Command) (string, error) {
	if !cmd.Project || cmd.Agent == "" {
		return cmd.Agent, nil
	}
	allowed := c.ProjectAgents
	if allowed == nil {
		allowed = DefaultProjectAgents
	}
	if !slices.Contains(allowed, cmd.Agent) {
		return "", fmt.Errorf("command %q comes from the project's files and names agent %q: %w (agentd.projectCommandAgents allows %v); name the agent in the request to run it anyway",
			cmd.Name, cmd.Agent, ErrAgentNotAllowed, allowed)
	}
	return cmd.Agent, nil
}

// Forget drops what is cached for dir.
func (c *Catalog) Forget(dir string) {
	c.mu.Lock()
	delete(c.cache, dir)
	c.mu.Unlock()
}

// ForgetAll drops what is cached for every directory.
func (c *Catalog) ForgetAll() {
	c.mu.Lock()
	c.cache = nil
	c.mu.Unlock()
}

// folders are the global folders and dir's project folders.
func (c *Catalog) folders(dir string) []folder {
	var out []folder
	for _, g := range c.Global {
		out = append(out, folder{root: g, sub: "."})
	}
	return append(out, projectFolders(dir)...)
}

// projectFolders are dir's command folders, from its repository's root
// (or dir alone outside one) down to dir, each below the directory it
// belongs to.
func projectFolders(dir string) []folder {
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
	var out []folder
	for _, d := range chain {
		for _, f := range ProjectFolders {
			out = append(out, folder{root: d, sub: f})
		}
	}
	return out
}

// fingerprint sums the names, sizes and times of the command files in
// folders (links followed only inside a folder's directory), so that a
// change of any is seen.
func fingerprint(folders []folder) string {
	h := sha256.New()
	for _, f := range folders {
		root, err := os.OpenRoot(f.root)
		if err != nil {
			continue
		}
		_ = fs.WalkDir(root.FS(), filepath.ToSlash(f.sub), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			if st, err := fs.Stat(root.FS(), p); err == nil {
				fmt.Fprintf(h, "%s\x00%s\x00%d\x00%d\n", f.root, p, st.Size(), st.ModTime().UnixNano())
			}
			return nil
		})
		root.Close()
	}
	return hex.EncodeToString(h.Sum(nil))
}
