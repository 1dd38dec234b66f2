package sqlite_test

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/sqlite"
)

// TestMovedDatabaseNotRecreated: once the database file is moved away
// under a running store, a reader connection opened after the move does
// not create an empty database at the old path and read from it: a read
// needing more connections than were open (any moment of concurrency)
// answered "no such table" (a node's prompt got a 500 instead of its
// storage error), and the empty file would be what a restart opened.
func TestMovedDatabaseNotRecreated(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "a.db")
	s, err := sqlite.Open(t.Context(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sess := core.Session{ID: core.NewID(core.PrefixSession, false), Title: "t", Directory: "/w"}
	if err := s.Tx(t.Context(), func(tx store.Tx) error { return tx.InsertSession(t.Context(), sess) }); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path, path+".moved"); err != nil {
		t.Fatal(err)
	}
	// More readers at once than the pool has opened so far.
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for range 32 {
		wg.Go(func() {
			if _, err := s.Session(t.Context(), sess.ID); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(s.Classify(err), store.ErrStorage) {
			t.Errorf("a read after the move failed with %v, not a storage error", err)
		}
	}
	if _, err := os.Stat(path); err == nil {
		t.Errorf("a database was created at %s after the file was moved away", path)
	}
}
