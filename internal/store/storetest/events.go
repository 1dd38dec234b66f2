package storetest

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// publishedFrom hooks s's commits and returns what they published since,
// and the log's last seq before them.
func publishedFrom(t *testing.T, s store.Store) (func() []core.Event, int64) {
	t.Helper()
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
	return func() []core.Event {
		mu.Lock()
		defer mu.Unlock()
		return append([]core.Event(nil), published...)
	}, before
}

func testEventsOrdered(t *testing.T, s store.Store, _ func() store.Store) {
	hooked, before := publishedFrom(t, s)
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
	if published := hooked(); len(published) != 60 || published[0].Seq != evs[0].Seq || published[59].Seq != evs[59].Seq {
		t.Errorf("commit hook saw %d events", len(published))
	}
	one, _ := s.Events(ctx(t), store.EventQuery{After: before, SessionID: "ses_1"})
	if len(one) != 20 {
		t.Fatalf("session filter: %d events, want 20", len(one))
	}
	eventsAfterOwnEvent(t, s, "ses_1", one)
	page, _ := s.Events(ctx(t), store.EventQuery{After: evs[10].Seq, Limit: 5})
	if len(page) != 5 || page[0].Seq != evs[11].Seq {
		t.Errorf("paging after %d wrong", evs[10].Seq)
	}
	var props map[string]int
	if err := json.Unmarshal(evs[4].Properties, &props); err != nil || props["i"] != 1 || props["j"] != 1 {
		t.Errorf("properties round trip: %s", evs[4].Properties)
	}
}

// testEventsOfOneTx: one transaction of many events (a store may insert
// them several at a time): the commit hook's seqs are the stored ones,
// event by event.
func testEventsOfOneTx(t *testing.T, s store.Store, _ func() store.Store) {
	hooked, before := publishedFrom(t, s)
	mustTx(t, s, func(tx store.Tx) error {
		for k := range 37 {
			if err := tx.AppendEvent(ctx(t), core.MustEvent(fmt.Sprintf("ses_%d", k%4), "test.many", map[string]int{"k": k})); err != nil {
				return err
			}
		}
		return nil
	})
	many, err := s.Events(ctx(t), store.EventQuery{After: before, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	published := hooked()
	if len(many) != 37 || len(published) != 37 {
		t.Fatalf("%d events stored, %d published; want 37", len(many), len(published))
	}
	for k := range many {
		if many[k].Seq != before+int64(k)+1 || published[k].Seq != many[k].Seq || published[k].ID != many[k].ID ||
			string(published[k].Properties) != string(many[k].Properties) || many[k].SessionID != fmt.Sprintf("ses_%d", k%4) {
			t.Fatalf("event %d: stored seq %d %s %s, published seq %d %s", k, many[k].Seq, many[k].SessionID, many[k].Properties, published[k].Seq, published[k].Properties)
		}
	}
}

// testPruneInLogOrder: age pruning deletes the log's oldest stretch, in
// seq order; an old event behind a newer one (a clock set back) waits.
func testPruneInLogOrder(t *testing.T, s store.Store, _ func() store.Store) {
	_, _ = s.PruneEvents(ctx(t), time.Now().Add(time.Hour).UnixMilli(), 0)
	_, base, _ := s.EventBounds(ctx(t))
	old, now := time.Now().Add(-time.Hour).UnixMilli(), time.Now().UnixMilli()
	mustTx(t, s, func(tx store.Tx) error {
		for _, at := range []int64{old, old, now, old, now} {
			ev := core.MustEvent("ses_x", "test", 0)
			ev.Time = at
			if err := tx.AppendEvent(ctx(t), ev); err != nil {
				return err
			}
		}
		return nil
	})
	n, err := s.PruneEvents(ctx(t), time.Now().Add(-time.Minute).UnixMilli(), 0)
	if err != nil || n != 2 {
		t.Fatalf("prune by age: n=%d err=%v, want 2", n, err)
	}
	if first, last, _ := s.EventBounds(ctx(t)); first != base+3 || last != base+5 {
		t.Errorf("bounds after age prune = %d..%d, want %d..%d", first, last, base+3, base+5)
	}
	// Once everything before it is old, the late old event goes too.
	n, err = s.PruneEvents(ctx(t), now+1, 0)
	if err != nil || n != 3 {
		t.Fatalf("prune everything: n=%d err=%v, want 3", n, err)
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

// eventsAfterOwnEvent: a cursor that is one of the session's own events
// (a client resuming that session's stream from the last event it got)
// gives the rest of the session's events, without that one again.
func eventsAfterOwnEvent(t *testing.T, s store.Store, sessionID string, own []core.Event) {
	t.Helper()
	for _, limit := range []int{0, 3} {
		rest, err := s.Events(ctx(t), store.EventQuery{After: own[4].Seq, SessionID: sessionID, Limit: limit})
		want := len(own) - 5
		if limit > 0 {
			want = limit
		}
		if err != nil || len(rest) != want || rest[0].Seq != own[5].Seq {
			t.Errorf("session filter after its own event %d (limit %d): %d events from %v, want %d from %d (%v)",
				own[4].Seq, limit, len(rest), seqsOf(rest), want, own[5].Seq, err)
		}
	}
}

func seqsOf(evs []core.Event) []int64 {
	out := make([]int64, len(evs))
	for i, ev := range evs {
		out[i] = ev.Seq
	}
	return out
}
