package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/sqlite"
	"github.com/agentd/agentd/internal/store/sqlstore"
	"github.com/agentd/agentd/internal/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, func(t *testing.T) (store.Store, func() store.Store) {
		path := filepath.Join(t.TempDir(), "agentd.db")
		open := func() store.Store {
			s, err := sqlite.Open(t.Context(), path, sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
		return open(), open
	})
}

func TestIntegrityAndClose(t *testing.T) {
	t.Parallel()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "x", "a.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.IntegrityCheck(t.Context())
	if err != nil || res != "ok" {
		t.Fatalf("integrity = %q, %v", res, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

// TestCancelledCallerSparesTheBatch: a caller whose context is cancelled
// while its statement runs inside a shared (group-commit) transaction
// fails alone; the other callers of the batch commit. (SQLite rolls back
// a whole transaction when a statement is interrupted.)
func TestCancelledCallerSparesTheBatch(t *testing.T) {
	t.Parallel()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "a.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Hold the committer so that the next two callers share a batch.
	hold, held := make(chan struct{}), make(chan struct{})
	go s.Tx(context.Background(), func(store.Tx) error { close(held); <-hold; return nil })
	<-held
	cctx, cancel := context.WithCancel(t.Context())
	slow := make(chan error, 1)
	go func() {
		slow <- s.Tx(cctx, func(tx store.Tx) error {
			time.AfterFunc(10*time.Millisecond, cancel)
			// A write that runs long enough to be cancelled midway (an
			// interrupted write is what makes SQLite roll back everything).
			q := tx.(*sqlstore.Tx).Q
			if _, err := q.ExecContext(cctx, `CREATE TEMP TABLE IF NOT EXISTS big (x INTEGER)`); err != nil {
				return err
			}
			if _, err := q.ExecContext(cctx, `INSERT INTO big WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 300000)
				SELECT x FROM c`); err != nil {
				return err
			}
			return tx.InsertSession(cctx, storetest.NewSession("/slow", time.Now().UnixMilli()))
		})
	}()
	sess := storetest.NewSession("/other", time.Now().UnixMilli())
	other := make(chan error, 1)
	// The slow caller queues first, then the other: both wait for the
	// committer, which takes them in one batch once the held one ends.
	waitQueued(t, s, 1)
	go func() {
		other <- s.Tx(t.Context(), func(tx store.Tx) error { return tx.InsertSession(t.Context(), sess) })
	}()
	waitQueued(t, s, 2)
	close(hold)
	if err := <-slow; !errors.Is(err, context.Canceled) {
		t.Errorf("the cancelled caller: %v, want context.Canceled", err)
	}
	if err := <-other; err != nil {
		t.Fatalf("the other caller of the batch failed: %v", err)
	}
	if _, err := s.Session(t.Context(), sess.ID); err != nil {
		t.Errorf("the other caller's session was not committed: %v", err)
	}
	all, _ := s.Sessions(t.Context(), store.SessionQuery{})
	if len(all) != 1 {
		t.Errorf("%d sessions, want only the other caller's", len(all))
	}
}

// waitQueued waits until n transactions wait for the committer.
func waitQueued(t *testing.T, s *sqlite.Store, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); s.Waiting() < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d transactions queued, want %d", s.Waiting(), n)
		}
	}
}

// A database written before the status column existed (its sessions have
// none) still reports the status derived from the runs, per session and in
// the list, until a transaction rewrites it.
func TestStatusWithoutStoredColumn(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "a.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	busy, idle := storetest.NewSession("/a", now), storetest.NewSession("/a", now)
	run := core.Run{ID: core.NewID(core.PrefixRun, false), SessionID: busy.ID, State: core.RunRunning, Time: core.RunTime{Created: now}}
	ended := core.Run{ID: core.NewID(core.PrefixRun, false), SessionID: idle.ID, State: core.RunFailed, Reason: "x", Time: core.RunTime{Created: now, Ended: now}}
	if err := s.Tx(ctx, func(tx store.Tx) error {
		return errors.Join(tx.InsertSession(ctx, busy), tx.InsertSession(ctx, idle), tx.InsertRun(ctx, run), tx.InsertRun(ctx, ended))
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// What migration 0004 leaves behind on an older database.
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE sessions SET status = NULL`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err = sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if st, err := s.SessionStatus(ctx, busy.ID); err != nil || st.Type != core.StatusBusy || st.RunID != run.ID {
		t.Errorf("busy session without a stored status: %+v, %v", st, err)
	}
	if st, err := s.SessionStatus(ctx, idle.ID); err != nil || st.Type != core.StatusIdle || st.Last == nil || st.Last.Outcome != core.RunFailed {
		t.Errorf("idle session without a stored status: %+v, %v", st, err)
	}
	if m, err := s.ActiveStatuses(ctx); err != nil || len(m) != 1 || m[busy.ID].Type != core.StatusBusy {
		t.Errorf("active statuses without stored ones: %+v, %v", m, err)
	}
	run.State, run.Time.Ended = core.RunSucceeded, now+1
	if err := s.Tx(ctx, func(tx store.Tx) error { return tx.UpdateRun(ctx, run) }); err != nil {
		t.Fatal(err)
	}
	if m, err := s.ActiveStatuses(ctx); err != nil || len(m) != 0 {
		t.Errorf("after the run ended: %+v, %v", m, err)
	}
	if st, _ := s.SessionStatus(ctx, busy.ID); st.Type != core.StatusIdle || st.Last == nil || st.Last.RunID != run.ID {
		t.Errorf("after the run ended: %+v", st)
	}
}

// The stored status always equals the status derived from the runs,
// through the life of a queue of runs: admitted, queued behind another,
// running through phases, retrying, ended in each way.
func TestStoredStatusMatchesRuns(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "a.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now().UnixMilli()
	sess := storetest.NewSession("/a", now)
	if err := s.Tx(ctx, func(tx store.Tx) error { return tx.InsertSession(ctx, sess) }); err != nil {
		t.Fatal(err)
	}
	derived := func() core.SessionStatus {
		active, err := s.ActiveRuns(ctx, sess.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(active) > 0 {
			return core.StatusOf(&active[0], nil)
		}
		runs, err := s.Runs(ctx, sess.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		var last *core.Run
		for i := range runs {
			if last == nil || runs[i].Time.Ended > last.Time.Ended {
				last = &runs[i]
			}
		}
		return core.StatusOf(nil, last)
	}
	run := func(i int) core.Run {
		return core.Run{ID: fmt.Sprintf("run_%03dxxxxxxxxxxxxxxxxxxxxxxx", i), SessionID: sess.ID, State: core.RunQueued, Time: core.RunTime{Created: now + int64(i)}}
	}
	a, b, c := run(1), run(2), run(3)
	step := func(what string, fn func(tx store.Tx) error) {
		t.Helper()
		if err := s.Tx(ctx, fn); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		got, err := s.SessionStatus(ctx, sess.ID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(derived(), got); diff != "" {
			t.Errorf("after %s, stored status (-derived +stored):\n%s", what, diff)
		}
		m, _ := s.ActiveStatuses(ctx)
		if _, listed := m[sess.ID]; listed != (got.Type != core.StatusIdle) {
			t.Errorf("after %s: listed as active = %v with status %s", what, listed, got.Type)
		}
	}
	update := func(r *core.Run, state core.RunState, phase core.Phase) func(store.Tx) error {
		r.State, r.Phase = state, phase
		if core.TerminalState(state) {
			now += 10
			r.Time.Ended = now
		}
		cp := *r
		return func(tx store.Tx) error { return tx.UpdateRun(ctx, cp) }
	}
	step("admit a", func(tx store.Tx) error { return tx.InsertRun(ctx, a) })
	step("a runs", update(&a, core.RunRunning, ""))
	step("queue b and c", func(tx store.Tx) error { return errors.Join(tx.InsertRun(ctx, b), tx.InsertRun(ctx, c)) })
	step("a waits for a permission", update(&a, core.RunRunning, core.PhaseWaitingPermission))
	step("a retries", func(tx store.Tx) error {
		a.State, a.Attempt, a.RetryMessage, a.NextRetry = core.RunRetrying, 2, "429", now+1000
		return tx.UpdateRun(ctx, a)
	})
	step("a succeeds", update(&a, core.RunSucceeded, ""))
	step("c aborted in the queue", update(&c, core.RunInterrupted, ""))
	step("b runs", update(&b, core.RunRunning, ""))
	step("b fails and a queued d joins in one transaction", func(tx store.Tx) error {
		d := run(4)
		return errors.Join(update(&b, core.RunFailed, "")(tx), tx.InsertRun(ctx, d), tx.UpdateRun(ctx, func() core.Run { d.State, d.Time.Ended = core.RunInterrupted, now+50; return d }()))
	})
}

// TestStatusOfAnotherRule: a status stored by another version of the
// status rule is never read as it is: reads derive it from the runs, and
// the next start rewrites the row under the current rule.
func TestStatusOfAnotherRule(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "a.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	busy, idle := storetest.NewSession("/a", now), storetest.NewSession("/a", now)
	run := core.Run{ID: core.NewID(core.PrefixRun, false), SessionID: busy.ID, State: core.RunRunning, Time: core.RunTime{Created: now}}
	if err := s.Tx(ctx, func(tx store.Tx) error {
		return errors.Join(tx.InsertSession(ctx, busy), tx.InsertSession(ctx, idle), tx.InsertRun(ctx, run))
	}); err != nil {
		t.Fatal(err)
	}
	// Rows an older rule wrote, and wrote wrong.
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	stale := func() {
		t.Helper()
		for _, q := range []string{
			`UPDATE sessions SET status = '{"type":"idle"}', status_rule = 0, active = 1 WHERE id = '` + busy.ID + `'`,
			`UPDATE sessions SET status = '{"type":"busy","runID":"run_gone"}', status_rule = 0, active = 1 WHERE id = '` + idle.ID + `'`,
		} {
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(when string) {
		t.Helper()
		if st, err := s.SessionStatus(ctx, busy.ID); err != nil || st.Type != core.StatusBusy || st.RunID != run.ID {
			t.Errorf("%s: busy session read as %+v, %v", when, st, err)
		}
		if st, err := s.SessionStatus(ctx, idle.ID); err != nil || st.Type != core.StatusIdle {
			t.Errorf("%s: idle session read as %+v, %v", when, st, err)
		}
		if m, err := s.ActiveStatuses(ctx); err != nil || len(m) != 1 || m[busy.ID].RunID != run.ID {
			t.Errorf("%s: active statuses %+v, %v", when, m, err)
		}
	}
	stale()
	check("while open")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	stale()
	if s, err = sqlite.Open(ctx, path, sqlite.Options{}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check("after a restart")
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM sessions WHERE status_rule != ?`, core.StatusRule).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d rows left under another rule (%v)", n, err)
	}
}

// TestCheckpointerCopiesCommits: commits reach the database file without
// the writer checkpointing (its bound is far above these few pages): the
// checkpointer beside the committer copies them from the WAL.
func TestCheckpointerCopiesCommits(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "a.db")
	s, err := sqlite.Open(t.Context(), path, sqlite.Options{CheckpointEvery: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	size := func() int64 {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	before := size()
	err = s.Tx(t.Context(), func(tx store.Tx) error {
		for i := range 200 {
			if err := tx.InsertSession(t.Context(), storetest.NewSession(fmt.Sprintf("/d%d", i), time.Now().UnixMilli())); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for size() <= before {
		if time.Now().After(deadline) {
			t.Fatalf("database file still %d bytes: the commit was never checkpointed", before)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestNewSessionStoresItsStatus: a session that never ran has its (idle)
// status stored with it, under the current rule, so neither reads nor
// the next start-up have to derive it (start-up rewrote every such
// session, 5 s for 100,000).
func TestNewSessionStoresItsStatus(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "a.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sess := storetest.NewSession("/a", time.Now().UnixMilli())
	if err := s.Tx(ctx, func(tx store.Tx) error { return tx.InsertSession(ctx, sess) }); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var status sql.NullString
	var rule, active int
	if err := db.QueryRow(`SELECT status, status_rule, active FROM sessions WHERE id = ?`, sess.ID).Scan(&status, &rule, &active); err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(core.StatusOf(nil, nil))
	if status.String != string(want) || rule != core.StatusRule || active != 0 {
		t.Errorf("stored status %v rule %d active %d, want %s rule %d active 0", status, rule, active, want, core.StatusRule)
	}
}

// TestEncodedRowsAreText: rows written from the caller's encoding
// (PutPartJSON, PutMessageJSON, UpdateRunJSON) store JSON text, as every
// other write does, never a blob of the same bytes.
func TestEncodedRowsAreText(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "a.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now().UnixMilli()
	sess := storetest.NewSession("/a", now)
	run := core.Run{ID: core.NewID(core.PrefixRun, false), SessionID: sess.ID, State: core.RunRunning, Time: core.RunTime{Created: now}}
	msg := core.Message{ID: core.NewID(core.PrefixMessage, false), SessionID: sess.ID, Role: core.RoleUser, RunID: run.ID}
	part := core.Part{ID: core.NewID(core.PrefixPart, false), SessionID: sess.ID, MessageID: msg.ID, Type: core.PartText, Text: "hi"}
	encoded := func(v any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	err = s.Tx(ctx, func(tx store.Tx) error {
		return errors.Join(tx.InsertSession(ctx, sess), tx.InsertRun(ctx, run),
			tx.PutMessageJSON(ctx, msg, encoded(msg)), tx.PutPartJSON(ctx, part, encoded(part)),
			tx.UpdateRunJSON(ctx, run, encoded(run)))
	})
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, table := range []string{"messages", "parts", "runs"} {
		var kind string
		if err := db.QueryRow(`SELECT typeof(data) FROM ` + table).Scan(&kind); err != nil || kind != "text" {
			t.Errorf("%s.data stored as %q (%v), want text", table, kind, err)
		}
	}
}
