// Package snapshot records the state of a workspace, step by step, in a
// store of agentd's own: a git directory at .agentd/snapshot inside the
// workspace, with its own index, driven by the git command. It never
// touches the project's own git directory (index, branches, stash), works
// in a directory that is not a repository, honours the project's
// .gitignore files, leaves out files over a size limit, and forgets
// snapshots older than a retention period. Because it lives in the
// workspace, every node that serves the workspace (several nodes on
// PostgreSQL share it) can read every snapshot.
//
// A snapshot is a git tree: Track writes the workspace into one and
// returns its hash; Changed and Diff compare two; Restore puts files back
// as a tree had them.
package snapshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Dir is where a workspace's snapshots live, relative to the workspace.
const Dir = ".agentd/snapshot"

// ErrUnavailable is returned when snapshots cannot be taken here: git is
// not installed, or snapshots are switched off.
var ErrUnavailable = errors.New("snapshots are not available (they need git, and are off with \"snapshot\": false)")

// ErrTooLarge is returned for a workspace with more files than a snapshot
// takes.
var ErrTooLarge = errors.New("the workspace has too many files to snapshot")

// Options bound what snapshots take and keep.
type Options struct {
	// Disabled switches snapshots off (opencode's "snapshot": false).
	Disabled bool
	// MaxFileBytes leaves larger files out of snapshots (default 10 MiB).
	MaxFileBytes int64
	// MaxFiles refuses a workspace with more files than this to snapshot
	// (default 100,000).
	MaxFiles int
	// Keep is how long a snapshot can be restored (default 7 days).
	Keep time.Duration
}

// Store takes and reads the snapshots of workspaces. It is safe for
// concurrent use; operations on one workspace take turns, and Tracks that
// arrive while one runs share the next.
type Store struct {
	git string
	o   Options

	mu  sync.Mutex
	wss map[string]*workspace
}

// New returns a store; without git, or with Disabled, every operation
// returns ErrUnavailable.
func New(o Options) *Store {
	if o.MaxFileBytes <= 0 {
		o.MaxFileBytes = 10 << 20
	}
	if o.MaxFiles <= 0 {
		o.MaxFiles = 100_000
	}
	if o.Keep <= 0 {
		o.Keep = 7 * 24 * time.Hour
	}
	s := &Store{o: o, wss: map[string]*workspace{}}
	if !o.Disabled {
		s.git, _ = exec.LookPath("git")
	}
	return s
}

// Enabled reports whether snapshots can be taken.
func (s *Store) Enabled() bool { return s != nil && s.git != "" }

// workspace is one directory's snapshot store.
type workspace struct {
	dir, gitDir string

	// ops serialises the git commands run on the store's index.
	ops sync.Mutex

	// Tracks are grouped: callers join the next round, which one of them
	// runs for all.
	mu      sync.Mutex
	running bool
	next    *round

	pruned time.Time
	inited bool
}

// round is one Track run for every caller that joined it; wake is closed
// when the round before it ended, done when it has.
type round struct {
	done, wake chan struct{}
	hash       string
	err        error
}

func (s *Store) workspace(dir string) (*workspace, error) {
	if !s.Enabled() {
		return nil, ErrUnavailable
	}
	dir = filepath.Clean(dir)
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.wss[dir]
	if w == nil {
		w = &workspace{dir: dir, gitDir: filepath.Join(dir, Dir)}
		s.wss[dir] = w
	}
	return w, nil
}

// git runs a git command on the workspace's store, with stdin when given,
// and returns its standard output.
func (s *Store) run(ctx context.Context, w *workspace, stdin []byte, args ...string) ([]byte, error) {
	base := []string{
		"-c", "core.autocrlf=false", "-c", "core.quotepath=false", "-c", "core.fsmonitor=false",
		"-c", "core.longpaths=true", "-c", "core.symlinks=true", "-c", "gc.auto=0", "-c", "safe.directory=*",
		"-c", "core.hooksPath=/dev/null", "-c", "diff.external=", "-c", "core.pager=cat",
	}
	cmd := exec.CommandContext(ctx, s.git, append(base, args...)...)
	cmd.Dir = w.dir
	cmd.Env = []string{
		"GIT_DIR=" + w.gitDir, "GIT_WORK_TREE=" + w.dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0", "LC_ALL=C", "PATH=" + os.Getenv("PATH"), "HOME=" + w.gitDir,
	}
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 500 {
			msg = msg[:500]
		}
		return out, fmt.Errorf("git %s: %w: %s", args[0], err, msg)
	}
	return out, nil
}

// init makes the store's git directory, once: its own repository, told to
// ignore the snapshot store itself and what no project wants snapshotted.
func (s *Store) init(ctx context.Context, w *workspace) error {
	if err := clearStaleLock(w); err != nil {
		return fmt.Errorf("clear the snapshot store's stale lock: %w", err)
	}
	if w.inited {
		return nil
	}
	if _, err := os.Stat(filepath.Join(w.gitDir, "HEAD")); err != nil {
		if err := os.MkdirAll(w.gitDir, 0o755); err != nil {
			return fmt.Errorf("create the snapshot store: %w", err)
		}
		// The project's own git ignores agentd's folder.
		ignore := filepath.Join(w.dir, ".agentd", ".gitignore")
		if _, err := os.Stat(ignore); err != nil {
			_ = os.WriteFile(ignore, []byte("# agentd's own files (snapshots of this workspace)\n*\n"), 0o644)
		}
		if _, err := s.run(ctx, w, nil, "init", "-q"); err != nil {
			return err
		}
	}
	exclude := filepath.Join(w.gitDir, "info", "exclude")
	if err := os.MkdirAll(filepath.Dir(exclude), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(exclude, []byte("/.agentd/\n.agentd/\nnode_modules/\n.git\n"), 0o644); err != nil {
		return err
	}
	w.inited = true
	return nil
}
