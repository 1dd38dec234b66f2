package sqlite_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/sqlite"
	"github.com/agentd/agentd/internal/tmpfs"
)

func insertSession(t *testing.T, s store.Store, title string) error {
	t.Helper()
	return s.Tx(t.Context(), func(tx store.Tx) error {
		return tx.InsertSession(t.Context(), core.Session{ID: core.NewID(core.PrefixSession, false), Title: title, Directory: "/w"})
	})
}

// TestFullDiskIsAStorageError pins that a write refused by a full disk is
// told apart from a bad write (ErrStorageFull), leaves the database whole,
// and that the same write succeeds once space is freed.
func TestFullDiskIsAStorageError(t *testing.T) {
	t.Parallel()
	dir := tmpfs.Mount(t, "8m")
	s, err := sqlite.Open(t.Context(), filepath.Join(dir, "agentd.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := insertSession(t, s, "before"); err != nil {
		t.Fatal(err)
	}
	filler := tmpfs.Fill(t, dir)
	big := strings.Repeat("x", 256<<10)
	err = insertSession(t, s, big)
	if !errors.Is(err, store.ErrStorageFull) || !errors.Is(err, store.ErrStorage) {
		t.Fatalf("write on a full disk: %v; want ErrStorageFull", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := insertSession(t, s, big); err != nil {
		t.Fatalf("write after space was freed: %v", err)
	}
	sessions, err := s.Sessions(t.Context(), store.SessionQuery{})
	if err != nil || len(sessions) != 2 {
		t.Fatalf("sessions = %d, %v", len(sessions), err)
	}
	if res, err := s.IntegrityCheck(t.Context()); err != nil || res != "ok" {
		t.Fatalf("integrity = %q, %v", res, err)
	}
}

// TestReadOnlyDatabaseFailsOpen pins that a database that cannot be
// written fails Open with a message that says so, instead of opening
// (reads work) and failing every write after start-up.
func TestReadOnlyDatabaseFailsOpen(t *testing.T) {
	t.Parallel()
	dir := tmpfs.Mount(t, "8m")
	path := filepath.Join(dir, "agentd.db")
	s, err := sqlite.Open(t.Context(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := insertSession(t, s, "kept"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	tmpfs.ReadOnly(t, dir)
	s, err = sqlite.Open(t.Context(), path, sqlite.Options{})
	if err == nil {
		s.Close()
		t.Fatal("a read-only database opened")
	}
	if !strings.Contains(err.Error(), "does not accept writes") || !errors.Is(err, store.ErrStorage) {
		t.Fatalf("error does not say why: %v", err)
	}
}

// TestFullDiskFailsOpen pins that a database on a full disk fails Open,
// both where opening itself needs space (the WAL index) and where it does
// not (another handle keeps the WAL and its index open): an already
// migrated database is only read while opening, so only the start-up write
// probe catches the second.
func TestFullDiskFailsOpen(t *testing.T) {
	t.Parallel()
	for _, keepOpen := range []bool{false, true} {
		dir := tmpfs.Mount(t, "8m")
		path := filepath.Join(dir, "agentd.db")
		s, err := sqlite.Open(t.Context(), path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := insertSession(t, s, "kept"); err != nil {
			t.Fatal(err)
		}
		if keepOpen {
			defer s.Close()
		} else {
			s.Close()
		}
		filler := tmpfs.Fill(t, dir)
		s2, err := sqlite.Open(t.Context(), path, sqlite.Options{})
		if err == nil {
			s2.Close()
			t.Fatalf("keepOpen=%v: a database on a full disk opened", keepOpen)
		}
		if !strings.Contains(err.Error(), "does not accept writes") || !errors.Is(err, store.ErrStorage) {
			t.Fatalf("keepOpen=%v: error does not say why: %v", keepOpen, err)
		}
		os.Remove(filler)
		s2, err = sqlite.Open(t.Context(), path, sqlite.Options{})
		if err != nil {
			t.Fatalf("keepOpen=%v: open after space was freed: %v", keepOpen, err)
		}
		s2.Close()
	}
}

// TestProbeLeavesWritesDurable pins that the start-up write probe, whose
// own commit is not flushed, hands the writer back with the configured
// durability: a restart on an existing database (the probe runs) commits
// with synchronous FULL, or NORMAL when that was asked for.
func TestProbeLeavesWritesDurable(t *testing.T) {
	t.Parallel()
	for mode, want := range map[string]int{"": 2, "NORMAL": 1} {
		path := filepath.Join(t.TempDir(), "agentd.db")
		for start := range 2 { // the second start finds a migrated database
			s, err := sqlite.Open(t.Context(), path, sqlite.Options{Synchronous: mode})
			if err != nil {
				t.Fatal(err)
			}
			got, err := sqlite.WriterSynchronous(s)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("mode %q, start %d: writer's synchronous = %d, want %d", mode, start, got, want)
			}
			if err := insertSession(t, s, "s"+mode+string(rune('0'+start))); err != nil {
				t.Fatal(err)
			}
			s.Close()
		}
	}
}
