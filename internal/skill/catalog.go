package skill

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/agentd/agentd/internal/smallfile"
	"github.com/agentd/agentd/internal/vcs"
)

// ProjectFolders are the folders, relative to a directory and each of its
// parents up to its repository's root, whose SKILL.md files (at any depth
// below them) are that directory's skills: opencode's, Claude's, the
// Agent Skills convention's and agentd's own.
var ProjectFolders = []string{".opencode/skill", ".opencode/skills", ".claude/skills", ".agents/skills",
	".agentd/skill", ".agentd/skills"}

// GlobalFolders are the user's own skill folders: ~/.claude/skills,
// ~/.agents/skills, and skill and skills in agentd's configuration
// directory (configDir, e.g. ~/.config/agentd).
func GlobalFolders(home, configDir string) []string {
	var out []string
	if home != "" {
		out = append(out, filepath.Join(home, ".claude", "skills"), filepath.Join(home, ".agents", "skills"))
	}
	if configDir != "" {
		out = append(out, filepath.Join(configDir, "skill"), filepath.Join(configDir, "skills"))
	}
	return out
}

// Skill files are read as command files are (package command): through
// an os.Root of the directory their folder belongs to, so that a symlink
// that leads out of it is refused rather than followed (a model that can
// write .claude/skills could otherwise make GET /skill serve any file the
// server can read); only regular files, opened without blocking (a FIFO
// would hang the request), at most MaxFileBytes each. Walks are bounded
// too: a folder's tree is searched maxDepth folders deep, maxEntries
// entries at most, skipping .git and node_modules.
const (
	// MaxFileBytes bounds a SKILL.md.
	MaxFileBytes = 256 << 10
	// MaxSkills bounds the skills of one directory, and MaxBytes their
	// text (every one is cached, listed by GET /skill and described to
	// the model).
	MaxSkills  = 256
	MaxBytes   = 4 << 20
	maxDepth   = 6
	maxEntries = 10_000
)

// folder is a folder of skills: sub, below the directory root.
type folder struct {
	root, sub string
}

// file is a SKILL.md a walk found: p (slash-separated) below its folder's
// root, with the size and time of what it leads to.
type file struct {
	f         folder
	p         string
	size, mod int64
}

// Catalog resolves the skills of a session's directory: those of the
// global folders, then those of the directory's project folders (the
// repository root's first, the directory's own last, a later one
// replacing an earlier one of the same name) under the names still free.
// A project's files are the model's to write, so they add skills but
// never replace the user's. A directory's set is read again when a
// SKILL.md of its folders changes (names, sizes, times), and dropped by
// Forget.
type Catalog struct {
	// Global are folders read for every directory.
	Global []string
	// Logger reports skill files that cannot be read or are ignored.
	Logger *slog.Logger

	mu    sync.Mutex
	cache map[string]entry
}

type entry struct {
	fingerprint string
	skills      []Skill
}

// cacheSize bounds the directories remembered; the cache is cleared when
// full.
const cacheSize = 256

// For returns the skills of directory dir, sorted by name.
func (c *Catalog) For(dir string) []Skill {
	global, project, problems := c.scan(dir)
	fp := fingerprint(append(append([]file{}, global...), project...))
	c.mu.Lock()
	e, ok := c.cache[dir]
	c.mu.Unlock()
	if ok && e.fingerprint == fp {
		return e.skills
	}
	for _, p := range problems {
		c.warn("skill folder skipped", p)
	}
	skills := c.merge(c.load(global, false), c.load(project, true), dir)
	c.mu.Lock()
	if c.cache == nil || len(c.cache) >= cacheSize {
		c.cache = map[string]entry{}
	}
	c.cache[dir] = entry{fp, skills}
	c.mu.Unlock()
	return skills
}

// Get returns the skill of dir named name.
func (c *Catalog) Get(dir, name string) (Skill, bool) {
	for _, s := range c.For(dir) {
		if s.Name == name {
			return s, true
		}
	}
	return Skill{}, false
}

// Forget drops what is cached for dir.
func (c *Catalog) Forget(dir string) {
	c.mu.Lock()
	delete(c.cache, dir)
	c.mu.Unlock()
}

func (c *Catalog) warn(msg string, err error) {
	if c.Logger != nil {
		c.Logger.Warn(msg, "err", err)
	}
}

// merge adds the project's skills to the global ones under the names
// still free, and bounds the set.
func (c *Catalog) merge(global, project map[string]Skill, dir string) []Skill {
	for name, s := range project {
		if _, taken := global[name]; taken {
			c.warn("project skill ignored", fmt.Errorf("%s would replace the user's skill %q (in %s)", s.Location, name, dir))
			continue
		}
		global[name] = s
	}
	out := make([]Skill, 0, len(global))
	for _, s := range global {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	size := 0
	for i, s := range out {
		if size += len(s.Content) + len(s.Description); i == MaxSkills || size > MaxBytes {
			c.warn("skills left out", fmt.Errorf("%s has %d skills; the first %d by name are kept (at most %d, %d bytes)",
				dir, len(out), i, MaxSkills, MaxBytes))
			return out[:i]
		}
	}
	return out
}

// scan finds the SKILL.md files of the global folders and of dir's
// project folders.
func (c *Catalog) scan(dir string) (global, project []file, problems []error) {
	for _, g := range c.Global {
		found, err := walk(g, []string{"."})
		global = append(global, found...)
		problems = append(problems, err...)
	}
	for _, d := range chain(dir) {
		found, err := walk(d, ProjectFolders)
		project = append(project, found...)
		problems = append(problems, err...)
	}
	return global, project, problems
}

// load reads files in order, a later one replacing an earlier one of the
// same name.
func (c *Catalog) load(files []file, proj bool) map[string]Skill {
	out := map[string]Skill{}
	roots := map[string]*os.Root{}
	defer func() {
		for _, r := range roots {
			r.Close()
		}
	}()
	for _, f := range files {
		loc := filepath.Join(f.f.root, filepath.FromSlash(f.p))
		root, ok := roots[f.f.root]
		if !ok {
			var err error
			if root, err = os.OpenRoot(f.f.root); err != nil {
				c.warn("skill file skipped", fmt.Errorf("%s: %w", loc, err))
				continue
			}
			roots[f.f.root] = root
		}
		data, err := smallfile.ReadIn(root, f.p, MaxFileBytes)
		if err == nil {
			var s Skill
			if s, err = Parse(data); err == nil {
				s.Location, s.Project = loc, proj
				out[s.Name] = s
				continue
			}
		}
		c.warn("skill file skipped", fmt.Errorf("%s: %w", loc, err))
	}
	return out
}

// chain lists the directories from dir's repository's root (or dir
// alone outside one) down to dir.
func chain(dir string) []string {
	if dir == "" {
		return nil
	}
	out := []string{filepath.Clean(dir)}
	if root, ok := vcs.Root(dir); ok {
		for d := out[0]; d != root && filepath.Dir(d) != d; {
			d = filepath.Dir(d)
			out = append([]string{d}, out...)
		}
	}
	return out
}

// walk finds the SKILL.md files below the folders subs of directory
// root, within the bounds, through one os.Root of it.
func walk(root string, subs []string) ([]file, []error) {
	r, err := os.OpenRoot(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, []error{fmt.Errorf("%s: %w", root, err)}
	}
	defer r.Close()
	var out []file
	var problems []error
	for _, sub := range subs {
		f := folder{root: root, sub: sub}
		found, errs := walkFolder(r, f)
		out, problems = append(out, found...), append(problems, errs...)
	}
	return out, problems
}

// walkFolder finds the SKILL.md files below one folder.
func walkFolder(root *os.Root, f folder) ([]file, []error) {
	var out []file
	var problems []error
	sub := filepath.ToSlash(f.sub)
	base, seen := depth(sub), 0
	_ = fs.WalkDir(root.FS(), sub, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p != sub || !errors.Is(err, fs.ErrNotExist) {
				problems = append(problems, fmt.Errorf("%s: %w", filepath.Join(f.root, p), err))
			}
			return nil
		}
		if seen++; seen > maxEntries {
			problems = append(problems, fmt.Errorf("%s: more than %d entries; the rest is not searched", filepath.Join(f.root, sub), maxEntries))
			return fs.SkipAll
		}
		if d.IsDir() {
			if p != sub && (d.Name() == ".git" || d.Name() == "node_modules" || depth(p)-base > maxDepth) {
				return fs.SkipDir
			}
			return nil
		}
		if d.Name() != FileName {
			return nil
		}
		st, err := fs.Stat(root.FS(), p)
		if err != nil {
			problems = append(problems, fmt.Errorf("%s: %w", filepath.Join(f.root, p), err))
			return nil
		}
		out = append(out, file{f: f, p: p, size: st.Size(), mod: st.ModTime().UnixNano()})
		return nil
	})
	return out, problems
}

func depth(p string) int {
	if p == "." {
		return 0
	}
	return strings.Count(path.Clean(p), "/") + 1
}

// fingerprint sums the places, sizes and times of files, so that a change
// of any is seen.
func fingerprint(files []file) string {
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%s\x00%s\x00%d\x00%d\n", f.f.root, f.p, f.size, f.mod)
	}
	return hex.EncodeToString(h.Sum(nil))
}
