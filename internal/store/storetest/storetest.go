// Package storetest is the conformance suite every store driver passes. A
// driver's test calls Exercise with a function that opens a fresh, isolated
// store; the suite pins the semantics the engine relies on.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

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
		"MessagesByBytes":       testMessagesByBytes,
		"RetireFrom":            testRetireFrom,
		"RunsAndStatus":         testRunsAndStatus,
		"ActiveStatuses":        testActiveStatuses,
		"EventsOrdered":         testEventsOrdered,
		"RollbackWritesNothing": testRollback,
		"PruneAndBounds":        testPrune,
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

func userMessage(sessionID string) core.Message {
	return core.Message{ID: core.NewID(core.PrefixMessage, false), SessionID: sessionID, Role: core.RoleUser,
		Created: time.Now().UnixMilli(), Agent: "build", Model: core.ModelRef{ProviderID: "agentd", ModelID: "scripted"}}
}

func textPart(m core.Message, text string) core.Part {
	return core.Part{ID: core.NewID(core.PrefixPart, false), SessionID: m.SessionID, MessageID: m.ID, Type: core.PartText, Text: text}
}

func testMessagesAndParts(t *testing.T, s store.Store, _ func() store.Store) {
	sess := NewSession("/a", time.Now().UnixMilli())
	insertSession(t, s, sess)
	u := userMessage(sess.ID)
	p1 := textPart(u, "hello")
	a := core.Message{ID: core.NewID(core.PrefixMessage, false), SessionID: sess.ID, Role: core.RoleAssistant,
		Created: time.Now().UnixMilli(), ParentID: u.ID, ProviderID: "agentd", ModelID: "scripted", Mode: "build",
		Tokens: core.Tokens{Input: 3, Cache: core.CacheTokens{Read: 2}}}
	tool := core.Part{ID: core.NewID(core.PrefixPart, false), SessionID: sess.ID, MessageID: a.ID, Type: core.PartTool,
		CallID: "call_1", Tool: "echo", State: core.ToolState{Status: core.ToolRunning, Input: json.RawMessage(`{"x":1}`), Time: core.PartTime{Start: 5}}}
	mustTx(t, s, func(tx store.Tx) error {
		if err := tx.InsertMessage(ctx(t), u); err != nil {
			return err
		}
		if err := tx.PutPart(ctx(t), p1); err != nil {
			return err
		}
		if err := tx.PutMessage(ctx(t), a); err != nil {
			return err
		}
		return tx.PutPart(ctx(t), tool)
	})
	// Upsert replaces in place.
	tool.State = core.ToolState{Status: core.ToolCompleted, Input: json.RawMessage(`{"x":1}`), Output: "ok", Title: "echo", Time: core.PartTime{Start: 5, End: 6}}
	a.Completed = time.Now().UnixMilli()
	mustTx(t, s, func(tx store.Tx) error {
		if err := tx.PutMessage(ctx(t), a); err != nil {
			return err
		}
		return tx.PutPart(ctx(t), tool)
	})
	msgs, err := s.Messages(ctx(t), sess.ID, store.MessageQuery{})
	if err != nil {
		t.Fatal(err)
	}
	u.Seq, a.Seq = 1, 2
	want := []core.MessageWithParts{{Info: u, Parts: []core.Part{p1}}, {Info: a, Parts: []core.Part{tool}}}
	if diff := cmp.Diff(want, msgs, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	one, err := s.Message(ctx(t), sess.ID, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want[1], one, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("message (-want +got):\n%s", diff)
	}
	if _, err := s.Message(ctx(t), "ses_other", a.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("message of another session: err = %v", err)
	}
	err = s.Tx(ctx(t), func(tx store.Tx) error { return tx.InsertMessage(ctx(t), u) })
	if !errors.Is(err, store.ErrConflict) {
		t.Errorf("duplicate message: err = %v, want ErrConflict", err)
	}
	// Messages tied to a run, found without reading parts.
	u2 := userMessage(sess.ID)
	u2.RunID = "run_x"
	a2 := a
	a2.ID, a2.RunID = core.NewID(core.PrefixMessage, false), "run_x"
	mustTx(t, s, func(tx store.Tx) error {
		if err := tx.InsertMessage(ctx(t), u2); err != nil {
			return err
		}
		return tx.PutMessage(ctx(t), a2)
	})
	u2.Seq, a2.Seq = 3, 4
	rm, err := s.RunMessages(ctx(t), "run_x")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]core.Message{u2, a2}, rm); diff != "" {
		t.Errorf("run messages (-want +got):\n%s", diff)
	}
	// The newest of a role, with its parts; another run's are not it.
	tool2 := tool
	tool2.ID, tool2.MessageID = core.NewID(core.PrefixPart, false), a2.ID
	mustTx(t, s, func(tx store.Tx) error { return tx.PutPart(ctx(t), tool2) })
	last, err := s.LastRunMessage(ctx(t), "run_x", core.RoleAssistant)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(core.MessageWithParts{Info: a2, Parts: []core.Part{tool2}}, last, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("last assistant message of the run (-want +got):\n%s", diff)
	}
	a3 := core.Message{ID: core.NewID(core.PrefixMessage, false), SessionID: sess.ID, Role: core.RoleAssistant, RunID: "run_x"}
	other := core.Message{ID: core.NewID(core.PrefixMessage, false), SessionID: sess.ID, Role: core.RoleAssistant, RunID: "run_y"}
	mustTx(t, s, func(tx store.Tx) error {
		if err := tx.PutMessage(ctx(t), a3); err != nil {
			return err
		}
		return tx.PutMessage(ctx(t), other)
	})
	if last, err := s.LastRunMessage(ctx(t), "run_x", core.RoleAssistant); err != nil || last.Info.ID != a3.ID {
		t.Errorf("last assistant message of the run after another: %s, %v; want %s", last.Info.ID, err, a3.ID)
	}
	if last, err := s.LastRunMessage(ctx(t), "run_x", core.RoleUser); err != nil || last.Info.ID != u2.ID {
		t.Errorf("last user message of the run: %s, %v; want %s", last.Info.ID, err, u2.ID)
	}
	if _, err := s.LastRunMessage(ctx(t), "run_none", core.RoleAssistant); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("run without messages: err = %v, want ErrNotFound", err)
	}
}

func testMessagePaging(t *testing.T, s store.Store, _ func() store.Store) {
	sess := NewSession("/a", time.Now().UnixMilli())
	insertSession(t, s, sess)
	var ids []string
	mustTx(t, s, func(tx store.Tx) error {
		for range 10 {
			m := userMessage(sess.ID)
			ids = append(ids, m.ID)
			if err := tx.InsertMessage(ctx(t), m); err != nil {
				return err
			}
		}
		return nil
	})
	page, _ := s.Messages(ctx(t), sess.ID, store.MessageQuery{Limit: 3})
	if len(page) != 3 || page[0].Info.ID != ids[7] || page[2].Info.ID != ids[9] {
		t.Fatalf("last page wrong: %d", len(page))
	}
	between, _ := s.Messages(ctx(t), sess.ID, store.MessageQuery{After: ids[2], Before: ids[5]})
	if len(between) != 2 || between[0].Info.ID != ids[3] {
		t.Fatalf("after/before page wrong: %d", len(between))
	}
	since, _ := s.Messages(ctx(t), sess.ID, store.MessageQuery{Since: ids[8]})
	if len(since) != 2 || since[0].Info.ID != ids[8] {
		t.Fatalf("since page wrong: %d", len(since))
	}
	page, _ = s.Messages(ctx(t), sess.ID, store.MessageQuery{Limit: 3, Before: ids[7]})
	if len(page) != 3 || page[0].Info.ID != ids[4] || page[2].Info.ID != ids[6] {
		t.Fatalf("previous page wrong")
	}
	if page[0].Parts == nil {
		t.Error("parts must be an empty list, not null")
	}
}

// testRetireFrom: retired messages and parts stay in the store but no
// read returns them; a partial retirement keeps the message and its
// earlier parts.
func testRetireFrom(t *testing.T, s store.Store, _ func() store.Store) {
	sess := NewSession("/a", time.Now().UnixMilli())
	insertSession(t, s, sess)
	var msgs []core.Message
	var parts [][]core.Part
	mustTx(t, s, func(tx store.Tx) error {
		for range 4 {
			m := userMessage(sess.ID)
			m.RunID = "run_x"
			msgs = append(msgs, m)
			if err := tx.InsertMessage(ctx(t), m); err != nil {
				return err
			}
			var ps []core.Part
			for range 3 {
				p := textPart(m, "t")
				ps = append(ps, p)
				if err := tx.PutPart(ctx(t), p); err != nil {
					return err
				}
			}
			parts = append(parts, ps)
		}
		return nil
	})
	var gotMsgs, gotParts []string
	mustTx(t, s, func(tx store.Tx) error {
		var err error
		gotMsgs, gotParts, err = tx.RetireFrom(ctx(t), sess.ID, msgs[1].ID, parts[1][1].ID, "revert-1")
		return err
	})
	if len(gotMsgs) != 2 || gotMsgs[0] != msgs[2].ID || len(gotParts) != 2 || gotParts[0] != parts[1][1].ID {
		t.Fatalf("retired %v and parts %v", gotMsgs, gotParts)
	}
	left, _ := s.Messages(ctx(t), sess.ID, store.MessageQuery{})
	if len(left) != 2 || len(left[1].Parts) != 1 || left[1].Parts[0].ID != parts[1][0].ID {
		t.Fatalf("left %d messages", len(left))
	}
	if _, err := s.Message(ctx(t), sess.ID, msgs[3].ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a retired message was read: %v", err)
	}
	if run, _ := s.RunMessages(ctx(t), "run_x"); len(run) != 2 {
		t.Errorf("run messages = %d", len(run))
	}
	if m, _ := s.Message(ctx(t), sess.ID, msgs[1].ID); len(m.Parts) != 1 {
		t.Errorf("partly retired message has %d parts", len(m.Parts))
	}
	err := s.Tx(ctx(t), func(tx store.Tx) error {
		_, _, err := tx.RetireFrom(ctx(t), sess.ID, msgs[3].ID, "", "again")
		return err
	})
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("retiring from a retired message: %v", err)
	}
	mustTx(t, s, func(tx store.Tx) error {
		_, _, err := tx.RetireFrom(ctx(t), sess.ID, msgs[0].ID, "", "revert-2")
		return err
	})
	if left, _ := s.Messages(ctx(t), sess.ID, store.MessageQuery{}); len(left) != 0 {
		t.Errorf("after retiring from the first: %d left", len(left))
	}
}

// testMessagesByBytes: a byte budget keeps the newest messages whole and
// leaves out the older ones (those without parts too).
func testMessagesByBytes(t *testing.T, s store.Store, _ func() store.Store) {
	sess := NewSession("/a", time.Now().UnixMilli())
	insertSession(t, s, sess)
	big := strings.Repeat("x", 100_000)
	var ids []string
	mustTx(t, s, func(tx store.Tx) error {
		for i := range 10 {
			m := userMessage(sess.ID)
			ids = append(ids, m.ID)
			if err := tx.InsertMessage(ctx(t), m); err != nil {
				return err
			}
			if i == 3 {
				continue // a message without parts
			}
			for range 2 {
				if err := tx.PutPart(ctx(t), textPart(m, big)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	page, err := s.Messages(ctx(t), sess.ID, store.MessageQuery{MaxBytes: 450_000})
	if err != nil {
		t.Fatal(err)
	}
	// Each message holds ~200 kB: the third from the newest takes the
	// total past the budget and is the oldest returned, whole.
	if len(page) != 3 || page[0].Info.ID != ids[7] || page[2].Info.ID != ids[9] || len(page[0].Parts) != 2 {
		t.Fatalf("got %d messages", len(page))
	}
	all, _ := s.Messages(ctx(t), sess.ID, store.MessageQuery{})
	if len(all) != 10 || len(all[3].Parts) != 0 || len(all[4].Parts) != 2 {
		t.Errorf("without a budget: %d messages", len(all))
	}
}

func newRun(sessionID, state string, created int64) core.Run {
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

func testEventsOrdered(t *testing.T, s store.Store, _ func() store.Store) {
	var mu sync.Mutex
	var published []core.Event
	s.SetCommitHook(func(evs []core.Event) {
		mu.Lock()
		published = append(published, evs...)
		mu.Unlock()
	})
	_, before, err := s.EventBounds(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		mustTx(t, s, func(tx store.Tx) error {
			for j := range 3 {
				sid := fmt.Sprintf("ses_%d", j)
				if err := tx.AppendEvent(ctx(t), core.MustEvent(sid, "test.event", map[string]int{"i": i, "j": j})); err != nil {
					return err
				}
			}
			return nil
		})
	}
	evs, err := s.Events(ctx(t), store.EventQuery{After: before, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 60 {
		t.Fatalf("got %d events, want 60", len(evs))
	}
	for i, ev := range evs {
		if ev.Seq != before+int64(i)+1 {
			t.Fatalf("event %d has seq %d, want %d (dense, ordered)", i, ev.Seq, before+int64(i)+1)
		}
		if ev.ID != core.DurableEventID(ev.Seq) || ev.Time < 1e12 {
			t.Errorf("event %d: id %q time %d", i, ev.ID, ev.Time)
		}
	}
	mu.Lock()
	if len(published) != 60 || published[0].Seq != evs[0].Seq || published[59].Seq != evs[59].Seq {
		t.Errorf("commit hook saw %d events", len(published))
	}
	mu.Unlock()
	one, _ := s.Events(ctx(t), store.EventQuery{After: before, SessionID: "ses_1"})
	if len(one) != 20 {
		t.Errorf("session filter: %d events, want 20", len(one))
	}
	page, _ := s.Events(ctx(t), store.EventQuery{After: evs[10].Seq, Limit: 5})
	if len(page) != 5 || page[0].Seq != evs[11].Seq {
		t.Errorf("paging after %d wrong", evs[10].Seq)
	}
	var props map[string]int
	if err := json.Unmarshal(evs[4].Properties, &props); err != nil || props["i"] != 1 || props["j"] != 1 {
		t.Errorf("properties round trip: %s", evs[4].Properties)
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

func testPrune(t *testing.T, s store.Store, _ func() store.Store) {
	_, base, _ := s.EventBounds(ctx(t))
	old := time.Now().Add(-time.Hour).UnixMilli()
	mustTx(t, s, func(tx store.Tx) error {
		for i := range 10 {
			ev := core.MustEvent("ses_x", "test", i)
			if i < 4 {
				ev.Time = old
			}
			if err := tx.AppendEvent(ctx(t), ev); err != nil {
				return err
			}
		}
		return nil
	})
	n, err := s.PruneEvents(ctx(t), time.Now().Add(-time.Minute).UnixMilli(), 0)
	if err != nil || n != 4 {
		t.Fatalf("prune by age: n=%d err=%v, want 4", n, err)
	}
	first, last, _ := s.EventBounds(ctx(t))
	if first != base+5 || last != base+10 {
		t.Errorf("bounds after age prune = %d..%d, want %d..%d", first, last, base+5, base+10)
	}
	n, err = s.PruneEvents(ctx(t), 0, 2)
	if err != nil || n != 4 {
		t.Fatalf("prune by count: n=%d err=%v, want 4", n, err)
	}
	first, last, _ = s.EventBounds(ctx(t))
	if first != base+9 || last != base+10 {
		t.Errorf("bounds after count prune = %d..%d", first, last)
	}
	// Seq is never reused, even when the log is emptied.
	_, _ = s.PruneEvents(ctx(t), time.Now().Add(time.Hour).UnixMilli(), 0)
	first, last, _ = s.EventBounds(ctx(t))
	if first != last+1 || last != base+10 {
		t.Errorf("bounds of empty log = %d..%d", first, last)
	}
	mustTx(t, s, func(tx store.Tx) error {
		return tx.AppendEvent(ctx(t), core.MustEvent("ses_x", "test", 0))
	})
	if _, seq, _ := s.EventBounds(ctx(t)); seq != base+11 {
		t.Errorf("seq after emptying = %d, want %d", seq, base+11)
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

// testServerOrder: messages and parts come back in the order the server
// stored them, whatever their ids say (a client may choose ids that sort
// anywhere).
func testServerOrder(t *testing.T, s store.Store, _ func() store.Store) {
	sess := NewSession("/a", time.Now().UnixMilli())
	insertSession(t, s, sess)
	late := userMessage(sess.ID)
	late.ID = "msg_ffffffffffff" + late.ID[16:] // sorts after every real id
	early := userMessage(sess.ID)
	mustTx(t, s, func(tx store.Tx) error {
		if err := tx.InsertMessage(ctx(t), late); err != nil {
			return err
		}
		for _, text := range []string{"z", "a"} {
			p := textPart(late, text)
			if text == "z" {
				p.ID = "prt_ffffffffffff" + p.ID[16:]
			}
			if err := tx.PutPart(ctx(t), p); err != nil {
				return err
			}
		}
		return tx.InsertMessage(ctx(t), early)
	})
	msgs, err := s.Messages(ctx(t), sess.ID, store.MessageQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || msgs[0].Info.ID != late.ID || msgs[1].Info.ID != early.ID || msgs[0].Info.Seq >= msgs[1].Info.Seq {
		t.Fatalf("messages out of the server's order: %+v", msgs)
	}
	if msgs[0].Parts[0].Text != "z" || msgs[0].Parts[1].Text != "a" {
		t.Errorf("parts out of the server's order: %q, %q", msgs[0].Parts[0].Text, msgs[0].Parts[1].Text)
	}
	after, _ := s.Messages(ctx(t), sess.ID, store.MessageQuery{After: late.ID})
	if len(after) != 1 || after[0].Info.ID != early.ID {
		t.Errorf("messages after the first stored: %d", len(after))
	}
	since, _ := s.Messages(ctx(t), sess.ID, store.MessageQuery{Since: early.ID})
	if len(since) != 1 {
		t.Errorf("messages since the last stored: %d", len(since))
	}
}

// testScopedIDs: a message or part id of one session can never be
// written from another; the upsert answers ErrConflict and changes
// nothing.
func testScopedIDs(t *testing.T, s store.Store, _ func() store.Store) {
	a, b := NewSession("/a", time.Now().UnixMilli()), NewSession("/b", time.Now().UnixMilli())
	insertSession(t, s, a)
	insertSession(t, s, b)
	ma, mb := userMessage(a.ID), userMessage(b.ID)
	pa := textPart(ma, "mine")
	mustTx(t, s, func(tx store.Tx) error {
		if err := tx.InsertMessage(ctx(t), ma); err != nil {
			return err
		}
		if err := tx.InsertMessage(ctx(t), mb); err != nil {
			return err
		}
		return tx.PutPart(ctx(t), pa)
	})
	steal := pa
	steal.SessionID, steal.MessageID, steal.Text = b.ID, mb.ID, "stolen"
	if err := s.Tx(ctx(t), func(tx store.Tx) error { return tx.PutPart(ctx(t), steal) }); !errors.Is(err, store.ErrConflict) {
		t.Errorf("part id of another session: err = %v, want ErrConflict", err)
	}
	other := ma
	other.SessionID = b.ID
	if err := s.Tx(ctx(t), func(tx store.Tx) error { return tx.PutMessage(ctx(t), other) }); !errors.Is(err, store.ErrConflict) {
		t.Errorf("message id of another session: err = %v, want ErrConflict", err)
	}
	got, err := s.Message(ctx(t), a.ID, ma.ID)
	if err != nil || len(got.Parts) != 1 || got.Parts[0].Text != "mine" {
		t.Errorf("the first session's message changed: %+v %v", got, err)
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
	for _, state := range []string{core.RunRunning, core.RunFailed, core.RunSucceeded} {
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

// testEventsByBytes: a read bounded by bytes stops once the events reach
// the bound, and returns at least one.
func testEventsByBytes(t *testing.T, s store.Store, _ func() store.Store) {
	big := strings.Repeat("x", 4000)
	mustTx(t, s, func(tx store.Tx) error {
		for range 10 {
			if err := tx.AppendEvent(ctx(t), core.MustEvent("ses_b", "test.big", map[string]string{"x": big})); err != nil {
				return err
			}
		}
		return nil
	})
	evs, err := s.Events(ctx(t), store.EventQuery{Limit: 100, MaxBytes: 10000})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 3 {
		t.Errorf("10,000 bytes of 4,000-byte events: %d events, want 3", len(evs))
	}
	evs, _ = s.Events(ctx(t), store.EventQuery{Limit: 100, MaxBytes: 1})
	if len(evs) != 1 {
		t.Errorf("a bound below one event: %d events, want 1", len(evs))
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
