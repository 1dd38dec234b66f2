// Package storetest is the conformance suite every store driver passes. A
// driver's test calls Exercise with a function that opens a fresh, isolated
// store; the suite pins the semantics the engine relies on.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// Opener opens a fresh store for one test. Reopen closes nothing; it opens a
// second handle on the same database, as a restarted process would.
type Opener func(t *testing.T) (s store.Store, reopen func() store.Store)

// Exercise runs the conformance suite against the driver behind open.
func Exercise(t *testing.T, open Opener) {
	t.Helper()
	tests := map[string]func(t *testing.T, s store.Store, reopen func() store.Store){
		"SessionCRUD":           testSessionCRUD,
		"SessionList":           testSessionList,
		"SessionConflict":       testSessionConflict,
		"MessagesAndParts":      testMessagesAndParts,
		"MessagePaging":         testMessagePaging,
		"MessageSeqs":           testMessageSeqs,
		"MessageIntact":         testMessageIntact,
		"MessagesByBytes":       testMessagesByBytes,
		"RetireFrom":            testRetireFrom,
		"RunsAndStatus":         testRunsAndStatus,
		"ActiveStatuses":        testActiveStatuses,
		"EventsOrdered":         testEventsOrdered,
		"EventsOfOneTx":         testEventsOfOneTx,
		"RollbackWritesNothing": testRollback,
		"PruneAndBounds":        testPrune,
		"PruneInLogOrder":       testPruneInLogOrder,
		"DeleteCascades":        testDeleteCascades,
		"SurvivesReopen":        testReopen,
		"ConcurrentWriters":     testConcurrentWriters,
		"Permissions":           testPermissions,
		"ServerOrderNotIDs":     testServerOrder,
		"IDsScopedToOwner":      testScopedIDs,
		"EndedRunNeverChanges":  testEndedRun,
		"GrantedRulesKept":      testGranted,
		"EventsBoundedByBytes":  testEventsByBytes,
		"Todos":                 testTodos,
		"RevertJournal":         testRevertJournal,
		"APIKeys":               testAPIKeys,
		"RetireMessage":         testRetireMessage,
		"RetirePart":            testRetirePart,
		"KeepPart":              testKeepPart,
		"Schedules":             testSchedules,
		"ScheduleClaimRace":     testScheduleClaimRace,
		"WebhookSubscriptions":  testWebhookSubscriptions,
		"WebhookCallbacks":      testWebhookCallbacks,
		"WebhookDeliveries":     testWebhookDeliveries,
		"WebhookClaimsOnce":     testWebhookClaimsOnce,
	}
	for name, fn := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, reopen := open(t)
			fn(t, s, reopen)
		})
	}
}

func ctx(t *testing.T) context.Context { return t.Context() }

// NewSession builds a session for tests.
func NewSession(dir string, created int64) core.Session {
	return core.Session{
		ID: core.NewID(core.PrefixSession, true), Slug: "test", ProjectID: "global",
		Directory: dir, Title: "t", Version: "test",
		Time: core.SessionTime{Created: created, Updated: created},
	}
}

func mustTx(t *testing.T, s store.Store, fn func(tx store.Tx) error) {
	t.Helper()
	if err := s.Tx(ctx(t), fn); err != nil {
		t.Fatalf("tx: %v", err)
	}
}

func insertSession(t *testing.T, s store.Store, sess core.Session) {
	t.Helper()
	mustTx(t, s, func(tx store.Tx) error { return tx.InsertSession(ctx(t), sess) })
}

func testSessionCRUD(t *testing.T, s store.Store, _ func() store.Store) {
	now := time.Now().UnixMilli()
	sess := NewSession("/work/a", now)
	sess.Metadata = map[string]any{"k": "v"}
	insertSession(t, s, sess)
	got, err := s.Session(ctx(t), sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sess, got); diff != "" {
		t.Errorf("session round trip (-want +got):\n%s", diff)
	}
	// Timestamps are epoch milliseconds, not seconds.
	if got.Time.Created < 1e12 {
		t.Errorf("created = %d, want epoch ms", got.Time.Created)
	}
	sess.Title = "renamed"
	sess.Time.Updated = now + 5
	mustTx(t, s, func(tx store.Tx) error { return tx.UpdateSession(ctx(t), sess) })
	got, _ = s.Session(ctx(t), sess.ID)
	if got.Title != "renamed" || got.Time.Updated != now+5 {
		t.Errorf("update not applied: %+v", got)
	}
	if _, err := s.Session(ctx(t), "ses_missing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing session: err = %v, want ErrNotFound", err)
	}
	err = s.Tx(ctx(t), func(tx store.Tx) error {
		return tx.UpdateSession(ctx(t), NewSession("/x", now))
	})
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("update missing: err = %v, want ErrNotFound", err)
	}
	mustTx(t, s, func(tx store.Tx) error { return tx.DeleteSession(ctx(t), sess.ID) })
	if _, err := s.Session(ctx(t), sess.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleted session: err = %v", err)
	}
}

func testSessionList(t *testing.T, s store.Store, _ func() store.Store) {
	base := time.Now().UnixMilli()
	var ids []string
	for i := range 5 {
		sess := NewSession(fmt.Sprintf("/dir/%d", i%2), base+int64(i))
		insertSession(t, s, sess)
		ids = append(ids, sess.ID)
	}
	all, err := s.Sessions(ctx(t), store.SessionQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 5 {
		t.Fatalf("got %d sessions, want 5", len(all))
	}
	for i := range all {
		if all[i].ID != ids[4-i] {
			t.Errorf("position %d: %s, want %s (newest updated first)", i, all[i].ID, ids[4-i])
		}
	}
	lim, _ := s.Sessions(ctx(t), store.SessionQuery{Limit: 2})
	if len(lim) != 2 || lim[0].ID != ids[4] {
		t.Errorf("limit 2 = %d sessions", len(lim))
	}
	dir, _ := s.Sessions(ctx(t), store.SessionQuery{Directory: "/dir/1"})
	if len(dir) != 2 {
		t.Errorf("directory filter = %d sessions, want 2", len(dir))
	}
	// A cursor continues after a session; equal update times are ordered
	// by id.
	next, _ := s.Sessions(ctx(t), store.SessionQuery{AfterUpdated: all[1].Time.Updated, AfterID: all[1].ID})
	if len(next) != 3 || next[0].ID != ids[2] {
		t.Errorf("after the second: %d sessions", len(next))
	}
	same := NewSession("/dir/0", base+4)
	insertSession(t, s, same)
	all, _ = s.Sessions(ctx(t), store.SessionQuery{})
	var walked []string
	for cursor := (core.Session{}); ; {
		page, err := s.Sessions(ctx(t), store.SessionQuery{Limit: 2, AfterUpdated: cursor.Time.Updated, AfterID: cursor.ID})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, p := range page {
			walked = append(walked, p.ID)
		}
		cursor = page[len(page)-1]
	}
	if len(walked) != len(all) {
		t.Fatalf("paged %d sessions of %d", len(walked), len(all))
	}
	for i := range all {
		if walked[i] != all[i].ID {
			t.Errorf("paging order differs at %d", i)
		}
	}
}

func testSessionConflict(t *testing.T, s store.Store, _ func() store.Store) {
	sess := NewSession("/a", time.Now().UnixMilli())
	insertSession(t, s, sess)
	err := s.Tx(ctx(t), func(tx store.Tx) error { return tx.InsertSession(ctx(t), sess) })
	if !errors.Is(err, store.ErrConflict) {
		t.Errorf("duplicate insert: err = %v, want ErrConflict", err)
	}
}

func testRollback(t *testing.T, s store.Store, _ func() store.Store) {
	hooked := 0
	s.SetCommitHook(func(evs []core.Event) { hooked += len(evs) })
	_, last, _ := s.EventBounds(ctx(t))
	sess := NewSession("/a", time.Now().UnixMilli())
	boom := errors.New("boom")
	err := s.Tx(ctx(t), func(tx store.Tx) error {
		if err := tx.InsertSession(ctx(t), sess); err != nil {
			return err
		}
		if err := tx.AppendEvent(ctx(t), core.MustEvent(sess.ID, core.EventSessionCreated, sess)); err != nil {
			return err
		}
		// The transaction sees its own writes.
		if _, err := tx.Session(ctx(t), sess.ID); err != nil {
			return fmt.Errorf("read own write: %w", err)
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("tx err = %v, want boom", err)
	}
	if _, err := s.Session(ctx(t), sess.ID); !errors.Is(err, store.ErrNotFound) {
		t.Error("rolled back session is visible")
	}
	evs, _ := s.Events(ctx(t), store.EventQuery{After: last})
	if len(evs) != 0 || hooked != 0 {
		t.Errorf("rolled back event leaked: %d stored, %d published", len(evs), hooked)
	}
}

func testDeleteCascades(t *testing.T, s store.Store, _ func() store.Store) {
	sess := NewSession("/a", time.Now().UnixMilli())
	insertSession(t, s, sess)
	u := userMessage(sess.ID)
	r := newRun(sess.ID, core.RunSucceeded, time.Now().UnixMilli())
	mustTx(t, s, func(tx store.Tx) error {
		if err := tx.InsertMessage(ctx(t), u); err != nil {
			return err
		}
		if err := tx.PutPart(ctx(t), textPart(u, "x")); err != nil {
			return err
		}
		return tx.InsertRun(ctx(t), r)
	})
	mustTx(t, s, func(tx store.Tx) error { return tx.DeleteSession(ctx(t), sess.ID) })
	if _, err := s.Run(ctx(t), r.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("run survived session delete: %v", err)
	}
	msgs, _ := s.Messages(ctx(t), sess.ID, store.MessageQuery{})
	if len(msgs) != 0 {
		t.Errorf("messages survived session delete")
	}
	err := s.Tx(ctx(t), func(tx store.Tx) error { return tx.DeleteSession(ctx(t), sess.ID) })
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second delete: err = %v, want ErrNotFound", err)
	}
}

func testReopen(t *testing.T, s store.Store, reopen func() store.Store) {
	sess := NewSession("/a", time.Now().UnixMilli())
	u := userMessage(sess.ID)
	mustTx(t, s, func(tx store.Tx) error {
		if err := tx.InsertSession(ctx(t), sess); err != nil {
			return err
		}
		if err := tx.InsertMessage(ctx(t), u); err != nil {
			return err
		}
		return tx.AppendEvent(ctx(t), core.MustEvent(sess.ID, core.EventSessionCreated, sess))
	})
	_, seq, _ := s.EventBounds(ctx(t))
	s2 := reopen()
	if _, err := s2.Session(ctx(t), sess.ID); err != nil {
		t.Fatalf("session after reopen: %v", err)
	}
	msgs, _ := s2.Messages(ctx(t), sess.ID, store.MessageQuery{})
	if len(msgs) != 1 {
		t.Errorf("messages after reopen: %d", len(msgs))
	}
	_, last, _ := s2.EventBounds(ctx(t))
	if last != seq {
		t.Errorf("last seq after reopen = %d, want %d", last, seq)
	}
}

func testConcurrentWriters(t *testing.T, s store.Store, _ func() store.Store) {
	var mu sync.Mutex
	var seqs []int64
	s.SetCommitHook(func(evs []core.Event) {
		mu.Lock()
		for _, e := range evs {
			seqs = append(seqs, e.Seq)
		}
		mu.Unlock()
	})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 25 {
				err := s.Tx(ctx(t), func(tx store.Tx) error {
					return tx.AppendEvent(ctx(t), core.MustEvent("ses_c", "test", w*100+i))
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(seqs) != 200 {
		t.Fatalf("published %d events, want 200", len(seqs))
	}
	// The hook sees commits in seq order with no holes: the event hub
	// depends on it.
	for i := 1; i < len(seqs); i++ {
		if seqs[i] != seqs[i-1]+1 {
			t.Fatalf("hook order broken at %d: %d after %d", i, seqs[i], seqs[i-1])
		}
	}
}
