// Package snapshot records the state of a workspace, step by step, in a
// store of agentd's own: one git directory per workspace under the
// server's data (Options.Dir), with its own index, driven by the git
// command. It never touches the project's own git directory (index,
// branches, stash), works in a directory that is not a repository,
// honours the project's .gitignore files, leaves out files over a size
// limit, and forgets snapshots older than a retention period.
//
// The store is outside the workspace so that nothing the model or a
// cloned repository writes is read as the store's configuration; that
// configuration is agentd's, checked (and rewritten) before every use,
// and every git runs through internal/safegit. Nodes that serve one
// workspace use one store: nodes on one machine share the default, nodes
// on several machines name a shared folder.
//
// A snapshot is a git tree: Track writes the workspace into one and
// returns its hash; Changed and Diff compare two; Restore puts files back
// as a tree had them.
package snapshot

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agentd/agentd/internal/safegit"
)

// OldDir is where snapshots lived before they moved out of the workspace,
// relative to it. agentd never reads it (the model can write there); the
// snapshots it holds are no longer available, and it can be removed.
const OldDir = ".agentd/snapshot"

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
	// Dir holds the stores, one git directory per workspace named by a
	// hash of the workspace's absolute path (default: DefaultDir). Nodes
	// on several machines that serve one workspace name a folder they
	// share.
	Dir string
	// MaxFileBytes leaves larger files out of snapshots (default 10 MiB).
	MaxFileBytes int64
	// MaxFiles refuses a workspace with more files than this to snapshot
	// (default 100,000).
	MaxFiles int
	// Keep is how long a snapshot can be restored (default 7 days).
	Keep time.Duration
}

// DefaultDir is snapshot under the user's data directory
// ($XDG_DATA_HOME/agentd, else ~/.local/share/agentd), or under the
// temporary directory when there is no home.
func DefaultDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "agentd", "snapshot")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "share", "agentd", "snapshot")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("agentd-snapshot-%d", os.Getuid()))
}

// Store takes and reads the snapshots of workspaces. It is safe for
// concurrent use; operations on one workspace take turns, and Tracks that
// arrive while one runs share the next.
type Store struct {
	on bool
	o  Options

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
	if o.Dir == "" {
		o.Dir = DefaultDir()
	}
	if abs, err := filepath.Abs(o.Dir); err == nil {
		o.Dir = abs
	}
	return &Store{o: o, on: !o.Disabled && safegit.Available(), wss: map[string]*workspace{}}
}

// Enabled reports whether snapshots can be taken.
func (s *Store) Enabled() bool { return s != nil && s.on }

// Root returns the folder that holds every workspace's store ("" for a
// nil Store).
func (s *Store) Root() string {
	if s == nil {
		return ""
	}
	return s.o.Dir
}

// Dir returns the git directory that holds the snapshots of the
// workspace dir.
func (s *Store) Dir(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	sum := sha256.Sum256([]byte(filepath.Clean(dir)))
	return filepath.Join(s.o.Dir, hex.EncodeToString(sum[:16]))
}

// workspace is one directory's snapshot store.
type workspace struct {
	dir, gitDir string

	// ops serialises the git commands run on the store's index.
	ops opsLock

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
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	dir = filepath.Clean(dir)
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.wss[dir]
	if w == nil {
		w = &workspace{dir: dir, gitDir: s.Dir(dir)}
		w.ops.path = filepath.Join(w.gitDir, "agentd.lock")
		s.wss[dir] = w
	}
	return w, nil
}

// git runs a git command on the workspace's store, with stdin when given,
// and returns its standard output.
func (s *Store) run(ctx context.Context, w *workspace, stdin []byte, args ...string) ([]byte, error) {
	c := s.cmd(w, args...)
	if stdin != nil {
		c.Stdin = bytes.NewReader(stdin)
	}
	return safegit.Output(ctx, c)
}

// cmd is a git command on the workspace's store.
func (s *Store) cmd(w *workspace, args ...string) safegit.Cmd {
	return safegit.Cmd{Dir: w.dir, GitDir: w.gitDir, WorkTree: w.dir, Args: args}
}

// init makes the store's git directory when it is missing (first use,
// or an operator removed it) and checks before every use that what git
// reads there is agentd's (checkConfig).
func (s *Store) init(_ context.Context, w *workspace) error {
	if err := clearStaleLock(w); err != nil {
		return fmt.Errorf("clear the snapshot store's stale lock: %w", err)
	}
	if !w.inited {
		if within(w.dir, w.gitDir) {
			return fmt.Errorf("the snapshot store %s is inside the workspace %s: snapshots need a folder the workspace does not hold", w.gitDir, w.dir)
		}
		w.inited = true
	}
	if err := create(w); err != nil {
		return fmt.Errorf("create the snapshot store: %w", err)
	}
	return checkConfig(w.gitDir)
}

// within reports whether p is dir or inside it.
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
