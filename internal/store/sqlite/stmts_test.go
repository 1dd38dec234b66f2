package sqlite

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// openTemp opens a store on a fresh database, closed at the test's end.
func openTemp(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "a.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// After a first round of writes and reads, the same work prepares nothing
// more: every statement text is parsed once per handle, the writer's too
// (prepared between batches, since its one connection is busy inside
// them).
func TestStatementsPreparedOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openTemp(t)
	round := func() {
		t.Helper()
		now := time.Now().UnixMilli()
		sess := core.Session{ID: core.NewID(core.PrefixSession, true), Directory: "/a", Time: core.SessionTime{Created: now, Updated: now}}
		run := core.Run{ID: core.NewID(core.PrefixRun, false), SessionID: sess.ID, State: core.RunRunning, Time: core.RunTime{Created: now}}
		if err := s.Tx(ctx, func(tx store.Tx) error {
			if err := tx.InsertSession(ctx, sess); err != nil {
				return err
			}
			return tx.InsertRun(ctx, run)
		}); err != nil {
			t.Fatal(err)
		}
		run.State, run.Time.Ended = core.RunSucceeded, now+1
		if err := s.Tx(ctx, func(tx store.Tx) error { return tx.UpdateRun(ctx, run) }); err != nil {
			t.Fatal(err)
		}
		if _, err := s.SessionStatus(ctx, sess.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ActiveStatuses(ctx); err != nil {
			t.Fatal(err)
		}
	}
	count := func(c *stmtCache) (prepared, noted int) {
		c.mu.RLock()
		defer c.mu.RUnlock()
		return len(c.m), len(c.noted)
	}
	round()
	round() // the second round finds what the first noted prepared
	w1, _ := count(s.ws)
	r1, _ := count(s.rs)
	if w1 == 0 || r1 == 0 {
		t.Fatalf("prepared statements: writer %d, readers %d; want some of each", w1, r1)
	}
	for range 5 {
		round()
	}
	w2, noted := count(s.ws)
	r2, _ := count(s.rs)
	if w2 != w1 || r2 != r1 || noted != 0 {
		t.Errorf("repeating the same work prepared more: writer %d → %d (%d noted), readers %d → %d", w1, w2, noted, r1, r2)
	}
}

// A text holding several statements is not cached (a prepared statement
// holds one), and still runs.
func TestSeveralStatementsNotCached(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openTemp(t)
	q := `SELECT 1; SELECT 2`
	if st := s.rs.get(ctx, q); st != nil {
		t.Fatal("a two-statement text was prepared")
	}
	if _, err := s.rs.querier().ExecContext(ctx, q); err != nil {
		t.Fatal(err)
	}
}

func TestCommitCeiling(t *testing.T) {
	t.Parallel()
	rate, err := CommitCeiling(t.Context(), t.TempDir(), 50*time.Millisecond)
	if err != nil || rate <= 0 {
		t.Fatalf("ceiling = %v, %v", rate, err)
	}
}

// The writer keeps its statement journal in memory: on a temporary file,
// every page a batch's savepoints touch past 64 KiB cost two write
// syscalls (7 % of the server's CPU with 1,000 busy sessions).
func TestStatementJournalInMemory(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	var mode int
	if err := s.w.QueryRowContext(t.Context(), "PRAGMA temp_store").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != 2 {
		t.Fatalf("temp_store = %d, want 2 (MEMORY)", mode)
	}
}
