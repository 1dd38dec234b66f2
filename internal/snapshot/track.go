package snapshot

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Track writes the workspace's current state into a snapshot and returns
// its hash. Calls that arrive while another runs for the same workspace
// join the next round, which one of them runs for all: a thousand sessions
// in one directory cost two rounds, not a thousand.
func (s *Store) Track(ctx context.Context, dir string) (string, error) {
	w, err := s.workspace(dir)
	if err != nil {
		return "", err
	}
	w.mu.Lock()
	if w.next == nil {
		w.next = &round{done: make(chan struct{}), wake: make(chan struct{})}
	}
	r := w.next
	w.mu.Unlock()
	for {
		w.mu.Lock()
		if !w.running && w.next == r {
			// Nothing runs and r has not started: this caller runs it.
			w.running, w.next = true, nil
			w.mu.Unlock()
			s.runRound(w, r)
			return r.hash, r.err
		}
		wake := r.wake
		if w.next != r {
			wake = nil // r has started: only its end matters
		}
		w.mu.Unlock()
		select {
		case <-r.done:
			return r.hash, r.err
		case <-wake:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// runRound runs r on a context of its own (the caller that runs it may go
// away; the others still wait), then wakes the next round's callers so
// that one of them runs it.
func (s *Store) runRound(w *workspace, r *round) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	r.hash, r.err = s.track(ctx, w)
	cancel()
	w.mu.Lock()
	w.running = false
	next := w.next
	w.mu.Unlock()
	close(r.done)
	if next != nil {
		close(next.wake)
	}
}

// track adds the workspace to the store's index (files over the size
// limit left out) and writes the index as a tree.
func (s *Store) track(ctx context.Context, w *workspace) (string, error) {
	w.ops.Lock()
	defer w.ops.Unlock()
	if err := s.init(ctx, w); err != nil {
		return "", err
	}
	// What changed since the index last saw it: only those are stat'ed
	// for their size (git add itself skips unchanged files by their stat).
	out, err := s.run(ctx, w, nil, "ls-files", "-z", "--others", "--modified", "--exclude-standard")
	if err != nil {
		return "", err
	}
	spec := []byte(".\x00")
	n := 0
	for _, p := range bytes.Split(out, []byte{0}) {
		if len(p) == 0 {
			continue
		}
		if n++; n > s.o.MaxFiles {
			return "", fmt.Errorf("%w (more than %d)", ErrTooLarge, s.o.MaxFiles)
		}
		if st, err := os.Lstat(filepath.Join(w.dir, string(p))); err == nil && st.Mode().IsRegular() && st.Size() > s.o.MaxFileBytes {
			spec = append(spec, ":(exclude,literal)"...)
			spec = append(spec, p...)
			spec = append(spec, 0)
		}
	}
	if _, err := s.run(ctx, w, spec, "add", "-A", "--ignore-errors", "--pathspec-from-file=-", "--pathspec-file-nul"); err != nil {
		return "", err
	}
	tree, err := s.run(ctx, w, nil, "write-tree")
	if err != nil {
		return "", err
	}
	if time.Since(w.pruned) > 24*time.Hour {
		w.pruned = time.Now()
		// Snapshots are trees no ref holds: pruning removes those older
		// than the retention (the index keeps the current one).
		_, _ = s.run(ctx, w, nil, "prune", "--expire", fmt.Sprintf("%d.seconds.ago", int(s.o.Keep.Seconds())))
	}
	return strings.TrimSpace(string(tree)), nil
}
