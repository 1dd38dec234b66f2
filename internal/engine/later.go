package engine

import (
	"context"
	"sync"
	"time"

	"github.com/agentd/agentd/internal/store"
)

// A run's intermediate state — a step's start, its end — does not need a
// commit of its own: nothing is acted on until a later write, and a crash
// before that loses only output the resumed run produces again. Such
// writes wait in the runner (later) and ride along with its next
// transaction, in order, so that a turn whose model answers quickly
// commits twice: at admission and at its end. They never wait longer than
// the flush interval, so a reader does not see a stale transcript for
// longer than streamed text already may be; and a tool never starts before
// everything before it is durable (its running state is written by a
// transaction that carries them).
//
// A pending write is a snapshot: it writes the values it captured, never
// the runner's live state, so it can run on the timer's goroutine.
type later struct {
	// txMu makes the runner's transactions, and the timer's flush, go one
	// at a time; mu guards the fields and is never held across a commit,
	// so that a timer firing while a commit waits in the store's queue
	// (common under load) returns at once instead of parking a goroutine
	// per run behind it.
	txMu   sync.Mutex
	mu     sync.Mutex
	writes []func(w *writer)
	timer  *time.Timer
	closed bool
	// ctx and runID are the run's, for the timer's flush.
	ctx   context.Context
	runID string
}

// later queues a write for the runner's next transaction, and makes sure
// it is committed within the flush interval at the latest.
func (r *runner) later(write func(w *writer)) {
	l := &r.pending
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes = append(l.writes, write)
	if l.timer == nil && !l.closed {
		l.timer = time.AfterFunc(r.e.flushInterval(), r.flushLater)
	}
}

// maxFlushInterval bounds how stale a transcript may get while the writer
// is saturated.
const maxFlushInterval = 5 * time.Second

// flushInterval is how long intermediate writes may wait: FlushInterval,
// stretched while transactions queue for the store's writer — one more
// interval for every hundred waiting, up to maxFlushInterval. A flush of
// its own is then one transaction fewer in the queue: the runner's next
// transaction carries the writes instead.
func (e *Engine) flushInterval() time.Duration {
	d := e.cfg.FlushInterval
	if e.cfg.WriteQueue == nil {
		return d
	}
	if q := e.cfg.WriteQueue(); q > 0 {
		d += time.Duration(q/100) * e.cfg.FlushInterval
	}
	return min(d, max(maxFlushInterval, e.cfg.FlushInterval))
}

// tx runs fn in a transaction that first applies the pending writes. The
// runner's transactions go one at a time (and one at a time with the
// timer's flush), so an older snapshot never lands after a newer write.
// When the transaction fails, the pending writes stay pending.
func (r *runner) tx(ctx context.Context, fn func(tx store.Tx) error) error {
	r.pending.txMu.Lock()
	defer r.pending.txMu.Unlock()
	return r.txLocked(ctx, fn)
}

// txLocked is tx with txMu held. Writes queued while it commits are not
// part of it; they wait for the next transaction, and the timer is armed
// for them if the one that fired meanwhile found the commit in flight.
func (r *runner) txLocked(ctx context.Context, fn func(tx store.Tx) error) error {
	l := &r.pending
	l.mu.Lock()
	writes := l.writes
	l.mu.Unlock()
	rec, err := record(ctx, writes)
	var wrote []ownWrite
	if err == nil {
		err = r.e.st.Tx(ctx, func(tx store.Tx) error {
			wrote = wrote[:0]
			tx = ownTx{Tx: tx, wrote: &wrote}
			if err := rec.apply(ctx, tx); err != nil {
				return err
			}
			return fn(tx)
		})
	}
	if err == nil {
		r.wrote.add(wrote)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		l.writes = l.writes[len(writes):]
	}
	switch {
	case len(l.writes) == 0 && l.timer != nil:
		l.timer.Stop()
		l.timer = nil
	case len(l.writes) > 0 && l.timer == nil && !l.closed:
		l.timer = time.AfterFunc(r.e.flushInterval(), r.flushLater)
	}
	return err
}

// flushLater commits the pending writes on their own: the turn has run
// for a flush interval without another write.
func (r *runner) flushLater() {
	l := &r.pending
	l.mu.Lock()
	l.timer = nil
	closed := l.closed || len(l.writes) == 0
	l.mu.Unlock()
	if closed {
		return
	}
	if !l.txMu.TryLock() {
		// A transaction is in flight: it carries these writes, or arms
		// the timer again for those it leaves.
		return
	}
	defer l.txMu.Unlock()
	ctx, cancel := detached(l.ctx)
	defer cancel()
	if err := r.txLocked(ctx, func(store.Tx) error { return nil }); err != nil && ctx.Err() == nil {
		// The runner's next transaction carries them again, and reports.
		r.e.log.Debug("flush pending writes", "run", l.runID, "err", err)
	}
}

// hasPending reports whether writes wait for the next transaction.
func (r *runner) hasPending() bool {
	r.pending.mu.Lock()
	defer r.pending.mu.Unlock()
	return len(r.pending.writes) > 0
}

// closeLater stops the timer for good; a flush already running finishes
// first.
func (r *runner) closeLater() {
	l := &r.pending
	l.txMu.Lock()
	defer l.txMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
}
