package engine

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// gatedStore holds every transaction until release is closed, as a store
// whose commit queue is long does; it only runs the function, with no
// database behind it.
type gatedStore struct {
	store.Store
	entered chan struct{}
	release chan struct{}
}

func (g *gatedStore) Tx(ctx context.Context, fn func(store.Tx) error) error {
	g.entered <- struct{}{}
	<-g.release
	return fn(nil)
}

// A write queued while the runner's commit waits does not wait for it,
// the flush timer firing meanwhile does not queue behind it either, and
// the write still lands after the commit without another transaction of
// the runner's: the commit carries what was pending when it began, and
// arms the timer for what it leaves. (Real time: a goroutine blocked on a
// mutex would keep synctest's clock from moving.)
func TestWritesQueuedDuringCommitLandAfterIt(t *testing.T) {
	t.Parallel()
	const interval = 20 * time.Millisecond
	g := &gatedStore{entered: make(chan struct{}, 8), release: make(chan struct{})}
	e := &Engine{cfg: Config{FlushInterval: interval}, st: g, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	r := &runner{e: e, run: core.Run{ID: "run_test"}}
	r.pending.ctx, r.pending.runID = t.Context(), r.run.ID
	defer r.closeLater()
	var mu sync.Mutex
	var landed []string
	bLanded := make(chan struct{})
	land := func(what string) {
		mu.Lock()
		defer mu.Unlock()
		landed = append(landed, what)
		if what == "b" {
			close(bLanded)
		}
	}
	got := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), landed...)
	}

	r.later(func(*writer) { land("a") })
	done := make(chan error, 1)
	go func() { done <- r.tx(t.Context(), func(store.Tx) error { land("tx"); return nil }) }()
	<-g.entered
	queued := make(chan struct{})
	go func() {
		r.later(func(*writer) { land("b") })
		close(queued)
	}()
	select {
	case <-queued:
	case <-time.After(5 * time.Second):
		close(g.release)
		t.Fatal("queueing a write waited for the commit in flight")
	}
	// The timer fires while the commit waits (it was armed for "a")...
	for deadline := time.Now().Add(5 * time.Second); timerArmed(r); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			close(g.release)
			t.Fatal("the flush timer never fired")
		}
	}
	// ... and its flush returns at once, queueing nothing: the same call,
	// made here so that its return is seen.
	flushed := make(chan struct{})
	go func() {
		r.flushLater()
		close(flushed)
	}()
	select {
	case <-flushed:
	case <-time.After(5 * time.Second):
		close(g.release)
		t.Fatal("the timer's flush waited for the commit in flight")
	}
	if len(g.entered) != 0 {
		t.Error("the timer's flush queued a second transaction behind the runner's")
	}

	close(g.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"a", "tx"}, got()); d != "" {
		t.Fatalf("the commit carried (-want +got):\n%s", d)
	}
	select {
	case <-bLanded:
	case <-time.After(5 * time.Second):
	}
	if d := cmp.Diff([]string{"a", "tx", "b"}, got()); d != "" {
		t.Errorf("after the commit (-want +got):\n%s", d)
	}
}

// timerArmed reports whether the runner's flush timer is armed (and has
// not fired).
func timerArmed(r *runner) bool {
	r.pending.mu.Lock()
	defer r.pending.mu.Unlock()
	return r.pending.timer != nil
}

// TestFlushIntervalStretchesWithTheWriteQueue: intermediate writes wait
// longer while transactions queue for the store's writer, within a bound.
func TestFlushIntervalStretchesWithTheWriteQueue(t *testing.T) {
	t.Parallel()
	q := 0
	e := &Engine{cfg: Config{FlushInterval: 250 * time.Millisecond, WriteQueue: func() int { return q }}}
	for _, c := range []struct {
		queue int
		want  time.Duration
	}{{0, 250 * time.Millisecond}, {99, 250 * time.Millisecond}, {100, 500 * time.Millisecond},
		{750, 2 * time.Second}, {100000, maxFlushInterval}} {
		q = c.queue
		if got := e.flushInterval(); got != c.want {
			t.Errorf("queue %d: %v, want %v", c.queue, got, c.want)
		}
	}
	if got := (&Engine{cfg: Config{FlushInterval: time.Second}}).flushInterval(); got != time.Second {
		t.Errorf("without a queue to read: %v", got)
	}
}
