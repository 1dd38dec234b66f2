package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
	"github.com/google/go-cmp/cmp"
)

func newRun(sessionID string, state core.RunState, created int64) core.Run {
	return core.Run{ID: core.NewID(core.PrefixRun, false), SessionID: sessionID, State: state, Time: core.RunTime{Created: created}}
}

func testRunsAndStatus(t *testing.T, s store.Store, _ func() store.Store) {
	now := time.Now().UnixMilli()
	sess := NewSession("/a", now)
	insertSession(t, s, sess)
	st, err := s.SessionStatus(ctx(t), sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(core.SessionStatus{Type: core.StatusIdle}, st); diff != "" {
		t.Errorf("never-ran status (-want +got):\n%s", diff)
	}
	if _, err := s.SessionStatus(ctx(t), "ses_nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("status of missing session: err = %v, want ErrNotFound", err)
	}
	r1 := newRun(sess.ID, core.RunRunning, now)
	r2 := newRun(sess.ID, core.RunQueued, now+1)
	mustTx(t, s, func(tx store.Tx) error {
		if err := tx.InsertRun(ctx(t), r1); err != nil {
			return err
		}
		return tx.InsertRun(ctx(t), r2)
	})
	st, _ = s.SessionStatus(ctx(t), sess.ID)
	if st.Type != core.StatusBusy || st.RunID != r1.ID {
		t.Errorf("status with running run = %+v", st)
	}
	r1.State, r1.Attempt, r1.RetryMessage, r1.NextRetry = core.RunRetrying, 2, "rate limited", now+2000
	mustTx(t, s, func(tx store.Tx) error { return tx.UpdateRun(ctx(t), r1) })
	st, _ = s.SessionStatus(ctx(t), sess.ID)
	if diff := cmp.Diff(core.SessionStatus{Type: core.StatusRetry, RunID: r1.ID, Attempt: 2, Message: "rate limited", Next: now + 2000}, st); diff != "" {
		t.Errorf("retry status (-want +got):\n%s", diff)
	}
	r1.State, r1.Reason, r1.Error, r1.Time.Ended = core.RunFailed, core.ReasonRetriesExhausted, core.NewError("APIError", "429"), now+10
	r2.State, r2.Time.Ended = core.RunSucceeded, now+20
	mustTx(t, s, func(tx store.Tx) error {
		if err := tx.UpdateRun(ctx(t), r1); err != nil {
			return err
		}
		return tx.UpdateRun(ctx(t), r2)
	})
	st, _ = s.SessionStatus(ctx(t), sess.ID)
	want := core.SessionStatus{Type: core.StatusIdle, Last: &core.LastRun{RunID: r2.ID, Outcome: core.RunSucceeded, Time: now + 20}}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Errorf("idle status (-want +got):\n%s", diff)
	}
	runs, _ := s.Runs(ctx(t), sess.ID, 0)
	if len(runs) != 2 || runs[0].ID != r2.ID {
		t.Errorf("runs not newest first")
	}
	got, err := s.Run(ctx(t), r1.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r1, got); diff != "" {
		t.Errorf("run round trip (-want +got):\n%s", diff)
	}
}

func testActiveStatuses(t *testing.T, s store.Store, _ func() store.Store) {
	now := time.Now().UnixMilli()
	busy := map[string]bool{}
	for i := range 6 {
		sess := NewSession("/a", now)
		insertSession(t, s, sess)
		state := core.RunSucceeded
		if i%2 == 0 {
			state = core.RunRunning
			busy[sess.ID] = true
		}
		r := newRun(sess.ID, state, now)
		if state == core.RunSucceeded {
			r.Time.Ended = now
		}
		mustTx(t, s, func(tx store.Tx) error { return tx.InsertRun(ctx(t), r) })
	}
	m, err := s.ActiveStatuses(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != len(busy) {
		t.Errorf("active statuses = %d, want %d", len(m), len(busy))
	}
	for id, st := range m {
		if !busy[id] || st.Type != core.StatusBusy {
			t.Errorf("session %s: %+v", id, st)
		}
	}
}

func testPermissions(t *testing.T, s store.Store, _ func() store.Store) {
	sess := NewSession("/a", time.Now().UnixMilli())
	insertSession(t, s, sess)
	p := core.PermissionRequest{ID: core.NewID(core.PrefixPermission, false), SessionID: sess.ID, Permission: "bash",
		Patterns: []string{"rm -rf x"}, Metadata: map[string]any{"k": "v"}, Always: []string{"rm *"}, RunID: "run_1",
		Tool: &core.PermissionToolRef{MessageID: "msg_1", CallID: "call_1"}}
	p.Time.Created = time.Now().UnixMilli()
	mustTx(t, s, func(tx store.Tx) error { return tx.PutPermission(ctx(t), p) })
	pend, err := s.PendingPermissions(ctx(t), "")
	if err != nil || len(pend) != 1 {
		t.Fatalf("pending = %v, %v", pend, err)
	}
	if diff := cmp.Diff(p, pend[0]); diff != "" {
		t.Errorf("permission round trip (-want +got):\n%s", diff)
	}
	if one, _ := s.PendingPermissions(ctx(t), "ses_other"); len(one) != 0 {
		t.Error("session filter leaked")
	}
	p.Reply = core.ReplyOnce
	p.Time.Replied = time.Now().UnixMilli()
	mustTx(t, s, func(tx store.Tx) error { return tx.PutPermission(ctx(t), p) })
	if pend, _ := s.PendingPermissions(ctx(t), sess.ID); len(pend) != 0 {
		t.Error("answered request still pending")
	}
	if rp, err := s.RunPermissions(ctx(t), "run_1"); err != nil || len(rp) != 1 || rp[0].Reply != core.ReplyOnce {
		t.Errorf("run permissions = %+v, %v", rp, err)
	}
	got, err := s.Permission(ctx(t), p.ID)
	if err != nil || got.Reply != core.ReplyOnce {
		t.Errorf("permission = %+v, %v", got, err)
	}
	if _, err := s.Permission(ctx(t), "per_nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing permission: %v", err)
	}
}

// testEndedRun: once a run is terminal, no update moves it again.
func testEndedRun(t *testing.T, s store.Store, _ func() store.Store) {
	now := time.Now().UnixMilli()
	sess := NewSession("/a", now)
	insertSession(t, s, sess)
	r := newRun(sess.ID, core.RunRunning, now)
	mustTx(t, s, func(tx store.Tx) error { return tx.InsertRun(ctx(t), r) })
	r.State, r.Time.Ended = core.RunSucceeded, now+1
	mustTx(t, s, func(tx store.Tx) error { return tx.UpdateRun(ctx(t), r) })
	for _, state := range []core.RunState{core.RunRunning, core.RunFailed, core.RunSucceeded} {
		again := r
		again.State = state
		err := s.Tx(ctx(t), func(tx store.Tx) error { return tx.UpdateRun(ctx(t), again) })
		if !errors.Is(err, store.ErrRunEnded) {
			t.Errorf("update of an ended run to %s: err = %v, want ErrRunEnded", state, err)
		}
	}
	got, err := s.Run(ctx(t), r.ID)
	if err != nil || got.State != core.RunSucceeded || got.Time.Ended != now+1 {
		t.Errorf("ended run = %+v %v", got, err)
	}
	if err := s.Tx(ctx(t), func(tx store.Tx) error { return tx.UpdateRun(ctx(t), newRun(sess.ID, core.RunRunning, now)) }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("update of a missing run: err = %v", err)
	}
}

// testGranted: the rules "always" answers granted are kept with the
// session, apart from its JSON.
func testGranted(t *testing.T, s store.Store, _ func() store.Store) {
	sess := NewSession("/a", time.Now().UnixMilli())
	insertSession(t, s, sess)
	sess.Granted = []core.Rule{{Permission: "bash", Pattern: "git *", Action: core.ActionAllow}}
	mustTx(t, s, func(tx store.Tx) error { return tx.UpdateSession(ctx(t), sess) })
	got, err := s.Session(ctx(t), sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sess.Granted, got.Granted); diff != "" {
		t.Errorf("granted rules (-want +got):\n%s", diff)
	}
	list, _ := s.Sessions(ctx(t), store.SessionQuery{})
	if len(list) != 1 || len(list[0].Granted) != 1 {
		t.Errorf("listed session lost its granted rules: %+v", list)
	}
}

// testTodos: a session's todo list starts empty, is replaced whole, is
// gone with a failed transaction, and an unknown session is ErrNotFound.
func testTodos(t *testing.T, s store.Store, _ func() store.Store) {
	sess := NewSession("/a", time.Now().UnixMilli())
	insertSession(t, s, sess)
	got, err := s.Todos(ctx(t), sess.ID)
	if err != nil || got == nil || len(got) != 0 {
		t.Fatalf("todos of a new session = %#v, %v; want an empty list", got, err)
	}
	want := []core.Todo{{Content: "read the code", Status: core.TodoCompleted, Priority: "high"},
		{Content: "fix the bug", Status: core.TodoInProgress, Priority: "medium"}}
	mustTx(t, s, func(tx store.Tx) error { return tx.PutTodos(ctx(t), sess.ID, want) })
	errBoom := errors.New("boom")
	err = s.Tx(ctx(t), func(tx store.Tx) error {
		if err := tx.PutTodos(ctx(t), sess.ID, nil); err != nil {
			return err
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("failed transaction: %v", err)
	}
	got, err = s.Todos(ctx(t), sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("todos (-want +got):\n%s", diff)
	}
	if _, err := s.Todos(ctx(t), "ses_nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("todos of an unknown session: %v, want ErrNotFound", err)
	}
	err = s.Tx(ctx(t), func(tx store.Tx) error { return tx.PutTodos(ctx(t), "ses_nope", want) })
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("todos written to an unknown session: %v, want ErrNotFound", err)
	}
}
