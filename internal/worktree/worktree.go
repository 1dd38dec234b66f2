package worktree

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/agentd/agentd/internal/safegit"
	"github.com/agentd/agentd/internal/smallfile"
)

// BranchPrefix starts the name of the branch of every worktree agentd
// makes: agentd/<name>.
const BranchPrefix = "agentd/"

// Worktree is one linked worktree of a repository, in opencode's shape.
type Worktree struct {
	Name      string `json:"name"`
	Branch    string `json:"branch,omitempty"`
	Directory string `json:"directory"`
	// Managed marks a worktree agentd made (it lives in the manager's
	// folder for the repository): only those are reset and removed.
	Managed bool `json:"-"`
	// admin is its administrative folder in the repository.
	admin string
}

// Manager makes and removes worktrees under Root: each repository's in a
// folder of its own, <Root>/<repository name>-<hash of its path>/<name>.
// Changes take turns.
type Manager struct {
	Root string

	mu sync.Mutex
}

// Folder is where the manager keeps repo's worktrees.
func (m *Manager) Folder(repo Repo) string {
	sum := sha256.Sum256([]byte(repo.Root))
	return filepath.Join(m.Root, slug(filepath.Base(repo.Root))+"-"+hex.EncodeToString(sum[:4]))
}

// List returns the repository's linked worktrees that exist, by
// directory.
func (m *Manager) List(repo Repo) ([]Worktree, error) {
	entries, err := os.ReadDir(filepath.Join(repo.Common, "worktrees"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list worktrees: %w", err)
	}
	folder := real(m.Folder(repo))
	var out []Worktree
	for _, e := range entries {
		admin := filepath.Join(repo.Common, "worktrees", e.Name())
		b, err := smallfile.ReadNoFollow(filepath.Join(admin, "gitdir"))
		if err != nil {
			continue
		}
		dotGit := strings.TrimSpace(string(b))
		if !filepath.IsAbs(dotGit) {
			continue
		}
		dir := filepath.Dir(filepath.Clean(dotGit))
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			continue // pruned by hand: git's prune forgets it
		}
		w := Worktree{Name: filepath.Base(dir), Directory: dir, admin: admin,
			Managed: m.Root != "" && real(filepath.Dir(dir)) == folder}
		if head, err := smallfile.ReadNoFollow(filepath.Join(admin, "HEAD")); err == nil {
			w.Branch, _ = strings.CutPrefix(strings.TrimSpace(string(head)), "ref: refs/heads/")
			if strings.HasPrefix(w.Branch, "ref:") || len(w.Branch) == len(strings.TrimSpace(string(head))) {
				w.Branch = "" // detached
			}
		}
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Directory < out[j].Directory })
	return out, nil
}

// find returns repo's managed worktree at dir.
func (m *Manager) find(repo Repo, dir string) (Worktree, error) {
	list, err := m.List(repo)
	if err != nil {
		return Worktree{}, err
	}
	want := real(dir)
	for _, w := range list {
		if real(w.Directory) == want {
			if !w.Managed {
				return Worktree{}, fmt.Errorf("%s: %w", dir, ErrNotFound)
			}
			return w, nil
		}
	}
	return Worktree{}, fmt.Errorf("%s: %w", dir, ErrNotFound)
}

// Create makes a worktree of repo on a new branch agentd/<name> at the
// main worktree's HEAD, its files checked out. An empty name is made up;
// a taken one gets a suffix.
func (m *Manager) Create(ctx context.Context, repo Repo, name string) (Worktree, error) {
	if m.Root == "" {
		return Worktree{}, errors.New("no folder for worktrees is configured")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	main, err := safegit.Project(ctx, repo.Root)
	if err != nil {
		return Worktree{}, fmt.Errorf("open %s: %w", repo.Root, err)
	}
	defer main.Close()
	out, err := safegit.Output(ctx, main.Cmd(repo.Root, "rev-parse", "--verify", "--quiet", "HEAD^{commit}"))
	if err != nil {
		return Worktree{}, ErrNoCommit
	}
	sha := strings.TrimSpace(string(out))
	folder := m.Folder(repo)
	if err := os.MkdirAll(folder, 0o755); err != nil {
		return Worktree{}, fmt.Errorf("worktree folder: %w", err)
	}
	// Directories are named as sessions name theirs: links resolved.
	folder = real(folder)
	w, err := m.pick(ctx, main, repo, folder, slug(name))
	if err != nil {
		return Worktree{}, err
	}
	undo, err := m.lay(ctx, main, repo, w, sha)
	if err == nil {
		err = checkout(ctx, w.Directory, sha)
	}
	if err != nil {
		undo()
		return Worktree{}, err
	}
	w.Managed = true
	return w, nil
}

// pick chooses a name free as a folder, an administrative folder and a
// branch.
func (m *Manager) pick(ctx context.Context, main *safegit.Repo, repo Repo, folder, base string) (Worktree, error) {
	for i := range 26 {
		name := base
		switch {
		case base == "":
			name = randomName()
		case i > 0:
			name = base + "-" + randomName()
		}
		dir := filepath.Join(folder, name)
		if _, err := os.Lstat(dir); err == nil {
			continue
		}
		if _, err := os.Lstat(filepath.Join(repo.Common, "worktrees", name)); err == nil {
			continue
		}
		ref := "refs/heads/" + BranchPrefix + name
		if _, err := safegit.Output(ctx, main.Cmd(repo.Root, "show-ref", "--verify", "--quiet", ref)); err == nil {
			continue
		}
		return Worktree{Name: name, Branch: BranchPrefix + name, Directory: dir,
			admin: filepath.Join(repo.Common, "worktrees", name)}, nil
	}
	return Worktree{}, errors.New("no free worktree name after 26 tries")
}

// lay creates the branch, the administrative folder and the worktree's
// folder with its .git file; undo takes back what was made.
func (m *Manager) lay(ctx context.Context, main *safegit.Repo, repo Repo, w Worktree, sha string) (undo func(), err error) {
	var steps []func()
	undo = func() {
		for i := len(steps) - 1; i >= 0; i-- {
			steps[i]()
		}
	}
	ref := "refs/heads/" + w.Branch
	if _, err := safegit.Output(ctx, main.Cmd(repo.Root, "update-ref", "--no-deref", ref, sha, "")); err != nil {
		return undo, fmt.Errorf("create branch %s: %w", w.Branch, err)
	}
	steps = append(steps, func() {
		_, _ = safegit.Output(context.WithoutCancel(ctx), main.Cmd(repo.Root, "update-ref", "-d", ref, sha))
	})
	if err := os.MkdirAll(filepath.Dir(w.admin), 0o755); err != nil {
		return undo, fmt.Errorf("worktree admin folder: %w", err)
	}
	if err := os.Mkdir(w.admin, 0o755); err != nil {
		return undo, fmt.Errorf("worktree admin folder: %w", err)
	}
	steps = append(steps, func() { _ = os.RemoveAll(w.admin) })
	for name, body := range map[string]string{"gitdir": filepath.Join(w.Directory, ".git"), "commondir": "../..",
		"HEAD": "ref: " + ref} {
		if err := os.WriteFile(filepath.Join(w.admin, name), []byte(body+"\n"), 0o644); err != nil {
			return undo, fmt.Errorf("worktree admin folder: %w", err)
		}
	}
	if err := os.Mkdir(w.Directory, 0o755); err != nil {
		return undo, fmt.Errorf("worktree folder: %w", err)
	}
	steps = append(steps, func() { _ = os.RemoveAll(w.Directory) })
	if err := os.WriteFile(filepath.Join(w.Directory, ".git"), []byte("gitdir: "+w.admin+"\n"), 0o644); err != nil {
		return undo, fmt.Errorf("worktree .git: %w", err)
	}
	return undo, nil
}

// checkout fills a worktree's index and files from commit sha.
func checkout(ctx context.Context, dir, sha string) error {
	r, err := safegit.Project(ctx, dir)
	if err != nil {
		return fmt.Errorf("open worktree %s: %w", dir, err)
	}
	defer r.Close()
	if _, err := safegit.Output(ctx, r.Cmd(dir, "read-tree", "--reset", "-u", sha)); err != nil {
		return fmt.Errorf("check out %s: %w", dir, err)
	}
	return nil
}

// Dirty reports whether the worktree at dir holds uncommitted changes or
// untracked files.
func Dirty(ctx context.Context, dir string) (bool, error) {
	r, err := safegit.Project(ctx, dir)
	if err != nil {
		return false, fmt.Errorf("open worktree %s: %w", dir, err)
	}
	defer r.Close()
	out, err := safegit.Output(ctx, r.Cmd(dir, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignore-submodules=all"))
	if err != nil {
		return false, fmt.Errorf("status of %s: %w", dir, err)
	}
	return len(out) > 0, nil
}

var nonSlug = regexp.MustCompile(`[^a-z0-9]+`)

// slug makes s a name for a folder and a branch: lower-case letters,
// digits and dashes, at most 40 bytes.
func slug(s string) string {
	s = strings.Trim(nonSlug.ReplaceAllString(strings.ToLower(s), "-"), "-")
	if len(s) > 40 {
		s = strings.TrimRight(s[:40], "-")
	}
	return s
}

var (
	adjectives = []string{"amber", "brisk", "calm", "clever", "crisp", "eager", "fair", "gentle", "keen", "lively",
		"lucky", "mellow", "nimble", "plain", "quick", "quiet", "steady", "sunny", "swift", "tidy", "vivid", "witty"}
	nouns = []string{"acorn", "badger", "brook", "cedar", "comet", "delta", "ember", "falcon", "fern", "harbor",
		"heron", "island", "lantern", "maple", "meadow", "otter", "pebble", "quartz", "ridge", "sparrow", "willow"}
)

// RandomName is a made-up name of two words, such as "brisk-otter".
func RandomName() string { return randomName() }

func randomName() string {
	return adjectives[rand.IntN(len(adjectives))] + "-" + nouns[rand.IntN(len(nouns))]
}
