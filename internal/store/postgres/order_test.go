package postgres_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/postgres"
	"github.com/agentd/agentd/internal/store/postgres/pgtest"
)

// TestEventOrderTwoNodes: two nodes append events from many transactions
// that commit in another order than the one they wrote in (a random pause
// between the last statement and the commit), while a reader follows the
// log with after=cursor as GET /event?after= does. The reader must see
// the final log exactly: nothing skipped (an event that appears later
// below its cursor), nothing twice, never backwards; and each node's
// commit hook must receive the same log, without a hole.
func TestEventOrderTwoNodes(t *testing.T) {
	url := pgtest.Schema(t)
	postgres.SetBeforeCommit(func() {
		if d := rand.IntN(4); d > 0 {
			time.Sleep(time.Duration(d) * time.Millisecond) // a slow commit, not synchronisation
		}
	})
	t.Cleanup(func() { postgres.SetBeforeCommit(nil) })
	a, b := openNode(t, url, "node-a"), openNode(t, url, "node-b")
	hooks := [2]*hookLog{{}, {}}
	a.SetCommitHook(hooks[0].add)
	b.SetCommitHook(hooks[1].add)
	_, base, err := a.EventBounds(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	const writers, txs = 8, 30
	var wg sync.WaitGroup
	for w := range 2 * writers {
		st := []*postgres.Store{a, b}[w%2]
		wg.Go(func() {
			for i := range txs {
				err := st.Tx(t.Context(), func(tx store.Tx) error {
					for k := range 1 + rand.IntN(3) {
						ev := core.MustEvent(fmt.Sprintf("ses_%d", w), "test.order", map[string]string{"id": fmt.Sprintf("%d/%d/%d", w, i, k)})
						if err := tx.AppendEvent(t.Context(), ev); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	writing := make(chan struct{})
	go func() { wg.Wait(); close(writing) }()
	seen := follow(t, b, base, writing)

	final, err := a.Events(t.Context(), store.EventQuery{After: base, Limit: 100000, MaxBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	want := idsOf(final)
	for i, ev := range final {
		if ev.Seq != base+int64(i)+1 {
			t.Fatalf("final log: event %d has seq %d, want %d (dense)", i, ev.Seq, base+int64(i)+1)
		}
	}
	if got := idsOf(seen); !slices.Equal(got, want) {
		t.Errorf("the reader saw %d events, the log holds %d; first difference at %d", len(got), len(want), firstDiff(got, want))
	}
	for n, h := range hooks {
		// Each node's tail hands the log to its hook on its own time: the
		// reader having read everything says nothing of the tails.
		for deadline := time.Now().Add(20 * time.Second); len(h.events()) < len(want) && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		if got := idsOf(h.events()); !slices.Equal(got, want) {
			t.Errorf("node %d's commit hook saw %d events, the log holds %d; first difference at %d", n, len(got), len(want), firstDiff(got, want))
		}
	}
}

// follow reads the log after cursor until the writers are done and it has
// read everything, failing on any event at or below the cursor.
func follow(t *testing.T, s store.Store, cursor int64, writing <-chan struct{}) []core.Event {
	t.Helper()
	var seen []core.Event
	for {
		done := false
		select {
		case <-writing:
			done = true
		default:
		}
		evs, err := s.Events(t.Context(), store.EventQuery{After: cursor, Limit: 7})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Seq <= cursor {
				t.Fatalf("after=%d returned seq %d", cursor, ev.Seq)
			}
			cursor = ev.Seq
		}
		seen = append(seen, evs...)
		if done && len(evs) == 0 {
			return seen
		}
	}
}

type hookLog struct {
	mu  sync.Mutex
	evs []core.Event
}

func (h *hookLog) add(evs []core.Event) {
	h.mu.Lock()
	h.evs = append(h.evs, evs...)
	h.mu.Unlock()
}

func (h *hookLog) events() []core.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.evs)
}

// idsOf names each event by its seq and the id its writer gave it.
func idsOf(evs []core.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		var p struct{ ID string }
		_ = json.Unmarshal(ev.Properties, &p)
		out[i] = fmt.Sprintf("%d:%s", ev.Seq, p.ID)
	}
	return out
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
