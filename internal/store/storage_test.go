package store_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/sqlite"
)

// TestWriteDeadlineIsAStorageStall: a run's write that cannot commit
// before its deadline is recorded as a storage failure of the run (which
// then pauses and goes on), not left as an error of unknown cause.
func TestWriteDeadlineIsAStorageStall(t *testing.T) {
	t.Parallel()
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "a.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w := store.Watch(db, slog.New(slog.DiscardHandler))
	lost := &store.WriteFailures{}
	ctx := store.WithWriteFailures(t.Context(), lost)
	// Hold the committer so that the next write waits past its deadline.
	hold, held := make(chan struct{}), make(chan struct{})
	go w.Tx(context.Background(), func(store.Tx) error { close(held); <-hold; return nil })
	<-held
	wctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	time.AfterFunc(100*time.Millisecond, func() { close(hold) })
	err = w.Tx(wctx, func(store.Tx) error { return nil })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("late write: %v, want its deadline", err)
	}
	if !errors.Is(lost.Err(), store.ErrStorage) {
		t.Errorf("the run's write failures = %v, want a storage stall", lost.Err())
	}
	// A write of a run that was cancelled (aborted) is not a stall.
	lost2 := &store.WriteFailures{}
	cctx, ccancel := context.WithCancel(store.WithWriteFailures(t.Context(), lost2))
	ccancel()
	_ = w.Tx(cctx, func(store.Tx) error { return nil })
	if lost2.Err() != nil {
		t.Errorf("an aborted write was taken for a stall: %v", lost2.Err())
	}
}
