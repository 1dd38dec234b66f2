// Package undo reverts and unreverts a session's files, all or nothing.
//
// A revert is decided whole before a file is touched (snapshot.Plan: each
// file, the snapshot it comes from, and the snapshot of the present that
// rolls it back), journaled in the store (store.RevertJournal) in a
// transaction that also checks the session is idle, then carried out
// detached from the request that asked for it: a client that goes away
// does not stop it midway. Its end is recorded in one transaction that
// writes the session's revert point (or not), deletes the journal and
// appends a revert.updated event; a crash between journal and end is
// finished at the next start (or, on several nodes, by the next operation
// on the session or the sweep of another node once the journal's lease has
// expired), or rolled back when it cannot be finished, and recorded either
// way. While a journal exists the session admits no prompt and no other
// revert (ErrReverting).
//
// Undo, redo and fork change what a client sees, never the record status
// is derived from: runs and the event log are not touched.
package undo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/snapshot"
	"github.com/agentd/agentd/internal/store"
)

// ErrBusy means a session has an active run or a revert in progress,
// which a revert, an unrevert or a prompt must not race.
var ErrBusy = errors.New("session is busy")

// ErrReverting is ErrBusy while a revert of the session's files is in
// progress.
var ErrReverting = fmt.Errorf("%w: a revert of its files is in progress; retry when it has ended (revert.updated)", ErrBusy)

// ErrUnavailable means the session's files cannot be reverted here:
// snapshots are off or git is missing.
var ErrUnavailable = fmt.Errorf("revert: %w", snapshot.ErrUnavailable)

// FailedError is a revert that could not be made and was rolled back (or,
// when RolledBack is false, could not even be rolled back: the files are
// part way and the revert's event says so).
type FailedError struct {
	Err        error
	RolledBack bool
}

func (e *FailedError) Error() string {
	if e.RolledBack {
		return "the revert failed and was rolled back, the files are as they were: " + e.Err.Error()
	}
	return "the revert failed and could not be rolled back: " + e.Err.Error()
}

func (e *FailedError) Unwrap() error { return e.Err }

// Options configure a Reverter.
type Options struct {
	Store     store.Store
	Snapshots *snapshot.Store
	// Node names this node in the journals it carries out (default: one
	// of this process's own).
	Node string
	// Shared says several nodes share the store: at start only this
	// node's and expired journals are recovered, and expired ones are
	// swept every TTL/4.
	Shared bool
	// Deadline bounds a revert's work, its rollback as much again
	// (default 60 s); TTL is how long a journal stays its node's before
	// another may take it over (default 3 × Deadline, so that the owner
	// has stopped first); Wait how long a request waits for the end
	// (default 50 s, under the server's write deadline).
	Deadline, TTL, Wait time.Duration
	// Grace bounds how long Stop waits for reverts in flight, which are
	// then left to the next start (default 5 s).
	Grace  time.Duration
	Logger *slog.Logger
	// Changed, when set, is called after a revert or unrevert has moved a
	// session's revert point (its files are as the point says), on a
	// context of its own.
	Changed func(ctx context.Context, sessionID string)
}

// Reverter reverts and unreverts sessions' files. It is safe for
// concurrent use.
type Reverter struct {
	o     Options
	st    store.Store
	snaps *snapshot.Store
	log   *slog.Logger

	ctx    context.Context // cancelled when Stop gives up waiting
	cancel context.CancelFunc
	quit   chan struct{} // closed when Stop begins: the sweep ends

	mu       sync.Mutex
	ops      map[string]*op // session id → the revert carried out here
	stopped  bool
	wg       sync.WaitGroup
	stopOnce sync.Once

	// crash, set by tests, stops a revert dead at a stage ("journaled",
	// "applied") or after a file, as a kill would: nothing more is done
	// or recorded.
	crash func(stage string, done int) bool
	// clock, set by tests, is the time journals expire by.
	clock func() time.Time
}

// op is a revert carried out here: done is closed when it has ended.
type op struct {
	done chan struct{}
	sess core.Session
	err  error
}

// New returns a Reverter; call Start before serving requests.
func New(o Options) *Reverter {
	if o.Deadline <= 0 {
		o.Deadline = time.Minute
	}
	if o.TTL <= 0 {
		o.TTL = 3 * o.Deadline
	}
	if o.Wait <= 0 {
		o.Wait = 50 * time.Second
	}
	if o.Grace <= 0 {
		o.Grace = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Node == "" {
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		o.Node = fmt.Sprintf("pid%d-%s", os.Getpid(), hex.EncodeToString(b))
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Reverter{o: o, st: o.Store, snaps: o.Snapshots, log: o.Logger.With("component", "undo"),
		ctx: ctx, cancel: cancel, quit: make(chan struct{}), ops: map[string]*op{}}
}

// Start finishes or rolls back the reverts a previous process left in
// progress, before the server accepts requests: all of them on one node;
// on several, this node's own and those whose lease has expired, and then
// every TTL/4 those of nodes that died.
func (r *Reverter) Start(ctx context.Context) error {
	if err := r.recoverAll(ctx, true); err != nil {
		return fmt.Errorf("recover reverts: %w", err)
	}
	if r.o.Shared {
		r.wg.Add(1)
		go r.sweep()
	}
	return nil
}

// Stop waits (up to Grace) for the reverts in flight here, then stops
// those left: their journals stay for the next start, as after a crash.
// It is idempotent.
func (r *Reverter) Stop() {
	r.stopOnce.Do(func() {
		r.mu.Lock()
		r.stopped = true
		r.mu.Unlock()
		close(r.quit)
		done := make(chan struct{})
		go func() { r.wg.Wait(); close(done) }()
		t := time.NewTimer(r.o.Grace)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			r.log.Warn("reverts did not end within the shutdown grace period; the next start finishes them")
		}
		r.cancel()
		<-done
	})
}

func (r *Reverter) now() int64 {
	if r.clock != nil {
		return r.clock().UnixMilli()
	}
	return time.Now().UnixMilli()
}
