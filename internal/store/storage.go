package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// ErrStorage marks a write the storage refused for a reason of its own (an
// I/O error, a read-only file, a database that went away) rather than
// because of what was written. Such a write may succeed later unchanged.
// Drivers wrap their errors with it (or with ErrStorageFull).
var ErrStorage = errors.New("storage refused the write")

// ErrStorageFull is the ErrStorage of a full disk or quota. errors.Is
// reports both ErrStorageFull and ErrStorage for it.
var ErrStorageFull = &fullError{}

type fullError struct{}

func (*fullError) Error() string        { return "storage is full" }
func (*fullError) Is(target error) bool { return target == ErrStorage }

// WriteFailures collects the storage failures of the transactions run with
// a context that carries it (WithWriteFailures), so that a long piece of
// work — a run — can tell that one of its writes was lost even where the
// error itself was dropped on the way.
type WriteFailures struct {
	mu  sync.Mutex
	err error
}

// Err returns the first storage failure recorded, or nil.
func (w *WriteFailures) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *WriteFailures) note(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	w.mu.Unlock()
}

type failuresKey struct{}

// WithWriteFailures returns a context whose transactions on a watched store
// (Watch) record their storage failures in w. Detached contexts derived
// from it (context.WithoutCancel) keep recording.
func WithWriteFailures(ctx context.Context, w *WriteFailures) context.Context {
	return context.WithValue(ctx, failuresKey{}, w)
}

// Classifier is implemented by stores that can tell, in the error of any
// call, a failure of the storage itself (the database unreachable or
// restarting), which they return wrapped in ErrStorage: a read that met
// it is answered as unavailable, to retry, not as an internal error.
type Classifier interface {
	Classify(err error) error
}

// Classify implements Classifier by asking the watched store, when it can
// tell.
func (w *Watched) Classify(err error) error {
	if c, ok := w.Store.(Classifier); ok {
		return c.Classify(err)
	}
	return err
}

// Watched is a Store that notices storage failures: it logs once when
// writes start failing and once when they succeed again (not once per
// write), and records each failure in the WriteFailures of the context.
type Watched struct {
	Store
	log  *slog.Logger
	down atomic.Bool
	// observe, when set, is told each write transaction's duration and
	// error (for the metrics).
	observe func(time.Duration, error)
	// lost, once set, refuses every write: the storage can no longer be
	// trusted to keep what it is given.
	lost atomic.Pointer[error]
}

// Refuse makes every later write fail with err (wrapped in ErrStorage):
// the database was deleted or replaced under the server, and what it
// would write could not be found after a restart.
func (w *Watched) Refuse(err error) {
	err = fmt.Errorf("%w: %w", ErrStorage, err)
	if w.lost.CompareAndSwap(nil, &err) {
		w.log.Error("storage lost; writes are refused until the server is restarted", "err", err)
	}
}

// Lost returns the error Refuse was given, or nil.
func (w *Watched) Lost() error {
	if p := w.lost.Load(); p != nil {
		return *p
	}
	return nil
}

// ObserveTx registers a function told the duration and the error of each
// write transaction. Call it before the store is shared.
func (w *Watched) ObserveTx(fn func(time.Duration, error)) { w.observe = fn }

// Watch returns st watched for storage failures, logging to log.
func Watch(st Store, log *slog.Logger) *Watched {
	return &Watched{Store: st, log: log}
}

// Down reports whether the last write failed for a storage reason.
func (w *Watched) Down() bool { return w.down.Load() }

// Tx implements Store.
func (w *Watched) Tx(ctx context.Context, fn func(Tx) error) error {
	start := time.Now()
	err := w.Lost()
	if err == nil {
		err = w.Store.Tx(ctx, fn)
	}
	if w.observe != nil {
		w.observe(time.Since(start), err)
	}
	switch {
	case errors.Is(err, ErrStorage):
		if f, ok := ctx.Value(failuresKey{}).(*WriteFailures); ok {
			f.note(err)
		}
		if w.down.CompareAndSwap(false, true) {
			w.log.Error("storage refuses writes; runs pause and retry until it accepts them", "err", err)
		}
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		// The write could not commit within its deadline (a storage this
		// slow is, for the moment, not accepting writes): the run it
		// belongs to pauses and goes on, as after a refused write, instead
		// of failing for a cause that is not its own.
		if f, ok := ctx.Value(failuresKey{}).(*WriteFailures); ok {
			f.note(fmt.Errorf("%w: no commit within the write's deadline: %w", ErrStorage, err))
		}
	case err == nil:
		if w.down.Load() && w.down.CompareAndSwap(true, false) {
			w.log.Info("storage accepts writes again; paused runs resume")
		}
	}
	return err
}
