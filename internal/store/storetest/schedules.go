package storetest

import (
	"errors"
	"sync"
	"testing"

	"github.com/agentd/agentd/internal/store"
)

// testSchedules: a schedule is read back as written and listed oldest
// first; due means a tick at or before now with none pending, or a
// pending tick whose claim lapsed; a tick is claimed only while it is
// still the stored one and nothing is pending; a pending tick is taken
// over and finished only under the claim it names; it all survives a
// reopen.
func testSchedules(t *testing.T, s store.Store, reopen func() store.Store) {
	a := store.Schedule{ID: "sch_a", Created: 10, Spec: []byte(`{"every":"1m"}`), Next: 100}
	b := store.Schedule{ID: "sch_b", Created: 20, Spec: []byte(`{}`), Next: 50}
	mustTx(t, s, func(tx store.Tx) error {
		if err := tx.InsertSchedule(ctx(t), a); err != nil {
			return err
		}
		return tx.InsertSchedule(ctx(t), b)
	})
	if err := s.Tx(ctx(t), func(tx store.Tx) error { return tx.InsertSchedule(ctx(t), a) }); !errors.Is(err, store.ErrConflict) {
		t.Errorf("insert twice: %v, want ErrConflict", err)
	}
	if _, err := s.Schedule(ctx(t), "sch_none"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing schedule: %v", err)
	}
	got, err := s.Schedule(ctx(t), "sch_a")
	if err != nil || got.Created != 10 || string(got.Spec) != `{"every":"1m"}` || got.Next != 100 || got.Pending != nil || got.Last != nil {
		t.Fatalf("read back %+v %v", got, err)
	}
	if due := dueIDs(t, s, 99); len(due) != 1 || due[0] != "sch_b" {
		t.Errorf("due at 99: %v", due)
	}
	if due := dueIDs(t, s, 100); len(due) != 2 || due[0] != "sch_b" {
		t.Errorf("due at 100, oldest tick first: %v", due)
	}
	claim := func(s store.Store, due, next int64, exp int64) error {
		return s.Tx(ctx(t), func(tx store.Tx) error { return tx.ClaimTick(ctx(t), "sch_a", due, next, []byte(`{"tick":100}`), exp) })
	}
	if err := claim(s, 90, 200, 150); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("claim of a tick that is not the stored one: %v", err)
	}
	if err := claim(s, 100, 200, 150); err != nil {
		t.Fatal(err)
	}
	if err := claim(s, 100, 200, 150); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second claim of one tick: %v", err)
	}
	if due := dueIDs(t, s, 150); len(due) != 1 || due[0] != "sch_b" {
		t.Errorf("a pending tick whose claim holds is not due: %v", due)
	}
	if err := claim(s, 200, 300, 400); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("claim of the next tick while one is pending: %v", err)
	}
	schedulesKept(t, reopen())
}

// schedulesKept goes on with testSchedules after a reopen.
func schedulesKept(t *testing.T, s store.Store) {
	got, err := s.Schedule(ctx(t), "sch_a")
	if err != nil || got.Next != 200 || string(got.Pending) != `{"tick":100}` || got.PendingExpires != 150 {
		t.Fatalf("after the claim and a reopen: %+v %v", got, err)
	}
	if due := dueIDs(t, s, 151); len(due) != 2 || due[0] != "sch_b" || due[1] != "sch_a" {
		t.Errorf("a pending tick whose claim lapsed is due: %v", due)
	}
	tx := func(fn func(tx store.Tx) error) error { return s.Tx(ctx(t), fn) }
	if err := tx(func(tx store.Tx) error { return tx.TakePending(ctx(t), "sch_a", 149, 500) }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("take over under another claim: %v", err)
	}
	if err := tx(func(tx store.Tx) error { return tx.TakePending(ctx(t), "sch_a", 150, 500) }); err != nil {
		t.Fatal(err)
	}
	if err := tx(func(tx store.Tx) error { return tx.FinishTick(ctx(t), "sch_a", 150, []byte(`{"late":true}`)) }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("finish under the claim that was taken over: %v", err)
	}
	if err := tx(func(tx store.Tx) error { return tx.FinishTick(ctx(t), "sch_a", 500, []byte(`{"runID":"r"}`)) }); err != nil {
		t.Fatal(err)
	}
	got, _ = s.Schedule(ctx(t), "sch_a")
	if got.Pending != nil || got.PendingExpires != 0 || string(got.Last) != `{"runID":"r"}` || got.Next != 200 {
		t.Errorf("after finish: %+v", got)
	}
	scheduleDeleted(t, s)
}

// scheduleDeleted ends testSchedules: the list, then a delete.
func scheduleDeleted(t *testing.T, s store.Store) {
	tx := func(fn func(tx store.Tx) error) error { return s.Tx(ctx(t), fn) }
	list, err := s.Schedules(ctx(t))
	if err != nil || len(list) != 2 || list[0].ID != "sch_a" || list[1].ID != "sch_b" {
		t.Errorf("list, oldest first: %+v %v", list, err)
	}
	if err := tx(func(tx store.Tx) error { return tx.DeleteSchedule(ctx(t), "sch_a") }); err != nil {
		t.Fatal(err)
	}
	if err := tx(func(tx store.Tx) error { return tx.DeleteSchedule(ctx(t), "sch_a") }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("delete twice: %v", err)
	}
	if _, err := s.Schedule(ctx(t), "sch_a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after delete: %v", err)
	}
}

// testScheduleClaimRace: of writers that claim one tick at once, exactly
// one wins, on every driver.
func testScheduleClaimRace(t *testing.T, s store.Store, _ func() store.Store) {
	mustTx(t, s, func(tx store.Tx) error {
		return tx.InsertSchedule(ctx(t), store.Schedule{ID: "sch_race", Created: 1, Spec: []byte(`{}`), Next: 1000})
	})
	const n = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	won, lost := 0, 0
	for range n {
		wg.Go(func() {
			err := s.Tx(ctx(t), func(tx store.Tx) error {
				return tx.ClaimTick(ctx(t), "sch_race", 1000, 2000, []byte(`{}`), 5000)
			})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case errors.Is(err, store.ErrNotFound):
				lost++
			default:
				t.Errorf("claim: %v", err)
			}
		})
	}
	wg.Wait()
	if won != 1 || lost != n-1 {
		t.Errorf("claims of one tick: %d won, %d lost; want 1 and %d", won, lost, n-1)
	}
}

func dueIDs(t *testing.T, s store.Store, now int64) []string {
	t.Helper()
	list, err := s.DueSchedules(ctx(t), now, 10)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, sc := range list {
		ids = append(ids, sc.ID)
	}
	return ids
}
