package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/postgres"
	"github.com/agentd/agentd/internal/store/postgres/pgtest"
	"github.com/agentd/agentd/internal/store/storetest"
)

func openNode(t *testing.T, url, node string) *postgres.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := postgres.Open(ctx, url, postgres.Options{Node: node, MaxConns: 4, Poll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// seedRun writes a session with one run in the given state.
func seedRun(t *testing.T, s store.Store, state core.RunState) core.Run {
	t.Helper()
	now := time.Now().UnixMilli()
	sess := storetest.NewSession("/w", now)
	run := core.Run{ID: core.NewID(core.PrefixRun, false), SessionID: sess.ID, State: state, Time: core.RunTime{Created: now}}
	err := s.Tx(t.Context(), func(tx store.Tx) error {
		if err := tx.InsertSession(t.Context(), sess); err != nil {
			return err
		}
		return tx.InsertRun(t.Context(), run)
	})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// leaseClock reads a run's lease expiry and the database's clock, both in
// epoch milliseconds: leases expire by the database's clock, not the
// test's.
type leaseClock struct{ db *sql.DB }

func newLeaseClock(t *testing.T, url string) leaseClock {
	t.Helper()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return leaseClock{db}
}

func (c leaseClock) read(t *testing.T, runID string) (expires, now int64) {
	t.Helper()
	err := c.db.QueryRowContext(t.Context(), `SELECT lease_expires_ms, (extract(epoch from clock_timestamp()) * 1000)::bigint
		FROM runs WHERE id = $1`, runID).Scan(&expires, &now)
	if err != nil {
		t.Fatal(err)
	}
	return expires, now
}

// waitUntil polls the database's clock until it is past ms.
func (c leaseClock) waitUntil(t *testing.T, runID string, ms int64) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, now := c.read(t, runID); now > ms {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the database's clock never passed %d", ms)
		}
	}
}

// waitExpired waits until the run's lease has expired on the database's
// clock.
func (c leaseClock) waitExpired(t *testing.T, runID string) {
	t.Helper()
	exp, _ := c.read(t, runID)
	c.waitUntil(t, runID, exp)
}

// TestMigrateTogether: nodes starting at the same moment on an empty schema
// migrate it once and all open.
func TestMigrateTogether(t *testing.T) {
	t.Parallel()
	url := pgtest.Schema(t)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() { openNode(t, url, "n"+string(rune('a'+i))) })
	}
	wg.Wait()
}

// TestClaimIsExclusive: of several nodes claiming one run at once exactly
// one gets it, with epoch 1 and no prior owner; while its lease is live
// nobody else can claim it.
func TestClaimIsExclusive(t *testing.T) {
	t.Parallel()
	url := pgtest.Schema(t)
	nodes := []*postgres.Store{openNode(t, url, "a"), openNode(t, url, "b"), openNode(t, url, "c")}
	run := seedRun(t, nodes[0], core.RunRunning)
	var mu sync.Mutex
	var wins []store.Claim
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() {
			c, ok, err := n.Claim(t.Context(), run.ID, 10*time.Second)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				wins = append(wins, c)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(wins) != 1 {
		t.Fatalf("%d nodes claimed the run", len(wins))
	}
	if c := wins[0]; c.Lease.Epoch != 1 || c.Prior != store.PriorNone || c.Run.ID != run.ID {
		t.Errorf("claim = %+v", c)
	}
	for _, n := range nodes {
		if _, ok, _ := n.Claim(t.Context(), run.ID, 10*time.Second); ok {
			t.Errorf("node %s claimed a run with a live lease", n.Node())
		}
	}
	if got, _ := nodes[1].Claimable(t.Context(), 10); len(got) != 0 {
		t.Errorf("claimable while leased: %v", got)
	}
}

// TestFencing: once a lease expired and another node claimed the run, the
// old owner's transactions are refused (nothing written) and its Lost
// callback fires; the new owner writes.
func TestFencing(t *testing.T) {
	t.Parallel()
	url := pgtest.Schema(t)
	a, b := openNode(t, url, "a"), openNode(t, url, "b")
	run := seedRun(t, a, core.RunRunning)
	ca, ok, err := a.Claim(t.Context(), run.ID, 200*time.Millisecond)
	if err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	lost := 0
	la := ca.Lease
	la.Lost = func() { lost++ }
	write := func(s store.Store, l *store.Lease, steps int) error {
		return s.Tx(store.WithLease(t.Context(), l), func(tx store.Tx) error {
			r, err := tx.Run(t.Context(), run.ID)
			if err != nil {
				return err
			}
			r.Steps = steps
			return tx.UpdateRun(t.Context(), r)
		})
	}
	if err := write(a, &la, 1); err != nil {
		t.Fatalf("owner's write: %v", err)
	}
	newLeaseClock(t, url).waitExpired(t, run.ID)
	// Expired and unclaimed: the old owner already writes nothing.
	if err := write(a, &la, 2); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("write under an expired lease: %v", err)
	}
	if st, _ := b.SessionStatus(t.Context(), run.SessionID); st.Type != core.StatusBusy || st.Phase != core.PhaseRecovering {
		t.Errorf("status while nobody holds the run = %+v, want busy/recovering", st)
	}
	cb, ok, err := b.Claim(t.Context(), run.ID, 10*time.Second)
	if err != nil || !ok || cb.Lease.Epoch != 2 || cb.Prior != store.PriorExpired {
		t.Fatalf("takeover = %+v %v %v", cb, ok, err)
	}
	if err := write(a, &la, 3); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("zombie write after takeover: %v", err)
	}
	if lost != 2 {
		t.Errorf("Lost called %d times, want 2", lost)
	}
	if err := write(b, &cb.Lease, 4); err != nil {
		t.Fatalf("new owner's write: %v", err)
	}
	got, _ := b.Run(t.Context(), run.ID)
	if got.Steps != 4 {
		t.Errorf("steps = %d, want 4 (1 by a, 4 by b; the zombie's 2 and 3 refused)", got.Steps)
	}
	// The old owner's renewal reports the lease lost.
	r, err := a.Renew(t.Context(), []store.Lease{ca.Lease}, time.Second)
	if err != nil || len(r.Lost) != 1 {
		t.Errorf("renew of a lost lease = %+v, %v", r, err)
	}
}

// TestFencingByEpoch: the epoch fences writes, not only the owner's name:
// a node restarted under the same name claims the run again once its
// lease expired, and a transaction still in flight under the old lease
// (same owner, older epoch) is refused and writes nothing.
func TestFencingByEpoch(t *testing.T) {
	t.Parallel()
	url := pgtest.Schema(t)
	old := openNode(t, url, "a")
	run := seedRun(t, old, core.RunRunning)
	c1, ok, err := old.Claim(t.Context(), run.ID, 200*time.Millisecond)
	if err != nil || !ok || c1.Lease.Epoch != 1 {
		t.Fatalf("claim = %+v %v %v", c1, ok, err)
	}
	newLeaseClock(t, url).waitExpired(t, run.ID)
	restarted := openNode(t, url, "a")
	c2, ok, err := restarted.Claim(t.Context(), run.ID, time.Minute)
	if err != nil || !ok || c2.Lease.Epoch != 2 || c2.Lease.Owner != c1.Lease.Owner || c2.Prior != store.PriorExpired {
		t.Fatalf("claim by the restarted node = %+v %v %v", c2, ok, err)
	}
	write := func(s store.Store, l *store.Lease, steps int) error {
		return s.Tx(store.WithLease(t.Context(), l), func(tx store.Tx) error {
			r, err := tx.Run(t.Context(), run.ID)
			if err != nil {
				return err
			}
			r.Steps = steps
			return tx.UpdateRun(t.Context(), r)
		})
	}
	for _, s := range []*postgres.Store{old, restarted} {
		if err := write(s, &c1.Lease, 1); !errors.Is(err, store.ErrFenced) {
			t.Errorf("a write under epoch 1 while epoch 2 holds the run: %v", err)
		}
	}
	if err := write(restarted, &c2.Lease, 2); err != nil {
		t.Fatalf("a write under the current epoch: %v", err)
	}
	if got, _ := restarted.Run(t.Context(), run.ID); got.Steps != 2 {
		t.Errorf("steps = %d, want 2 (the stale epoch's write refused)", got.Steps)
	}
	// A renewal of the stale lease reports it lost.
	r, err := restarted.Renew(t.Context(), []store.Lease{c1.Lease}, time.Minute)
	if err != nil || len(r.Lost) != 1 || r.Lost[0] != run.ID {
		t.Errorf("renewal under epoch 1 = %+v, %v; want it lost", r, err)
	}
}

// TestRenewReleaseAbort: renewal keeps a lease alive past its TTL and
// carries abort requests; release lets another node claim at once and
// tells it the run was stopped cleanly; the abort request reaches the
// owner through a notification.
func TestRenewReleaseAbort(t *testing.T) {
	t.Parallel()
	url := pgtest.Schema(t)
	a, b := openNode(t, url, "a"), openNode(t, url, "b")
	aborts := make(chan string, 4)
	a.OnAbort(func(runID string, reason core.EndReason) { aborts <- runID + " " + string(reason) })
	run := seedRun(t, a, core.RunRunning)
	// Long enough that a loaded machine's renewal, every poll of 10 ms
	// once half of it is left, always lands in time.
	const ttl = 2 * time.Second
	c, ok, err := a.Claim(t.Context(), run.ID, ttl)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	// Renewed whenever less than half the TTL is left, the lease lives
	// until the database's clock is well past the claim's expiry.
	clock := newLeaseClock(t, url)
	first, _ := clock.read(t, run.ID)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		exp, now := clock.read(t, run.ID)
		if now > first+ttl.Milliseconds() {
			break
		}
		if exp-now < ttl.Milliseconds()/2 {
			if r, err := a.Renew(t.Context(), []store.Lease{c.Lease}, ttl); err != nil || len(r.Lost) > 0 {
				t.Fatalf("renew: %+v %v", r, err)
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the database's clock never passed the claim's expiry")
		}
	}
	if _, ok, _ := b.Claim(t.Context(), run.ID, time.Second); ok {
		t.Fatal("claimed a renewed lease")
	}
	if err := b.RequestAbort(t.Context(), run.ID, core.ReasonAborted); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-aborts:
		if got != run.ID+" "+string(core.ReasonAborted) {
			t.Errorf("abort notification %q", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("owner not notified of the abort request")
	}
	r, err := a.Renew(t.Context(), []store.Lease{c.Lease}, time.Second)
	if err != nil || r.Aborts[run.ID] != core.ReasonAborted {
		t.Errorf("renewal did not carry the abort request: %+v %v", r, err)
	}
	if err := a.Release(t.Context(), []store.Lease{c.Lease}); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.Claimable(t.Context(), 10); len(got) != 1 || got[0] != run.SessionID {
		t.Errorf("claimable after release: %v", got)
	}
	cb, ok, err := b.Claim(t.Context(), run.ID, time.Second)
	if err != nil || !ok || cb.Prior != store.PriorReleased || cb.AbortReason != core.ReasonAborted {
		t.Errorf("claim after release = %+v %v %v", cb, ok, err)
	}
}

// TestLogAcrossNodes: every node's hook receives the whole log in seq
// order without holes, whichever node wrote each event, while several
// nodes write at once; each event is Committed by exactly one node's
// account, the one that wrote it.
func TestLogAcrossNodes(t *testing.T) {
	t.Parallel()
	url := pgtest.Schema(t)
	nodes := []*postgres.Store{openNode(t, url, "a"), openNode(t, url, "b"), openNode(t, url, "c")}
	type seen struct {
		mu   sync.Mutex
		seqs []int64
		mine map[int64]string // seq → the payload's writer, by Committed
	}
	views := make([]*seen, len(nodes))
	for i, n := range nodes {
		v := &seen{mine: map[int64]string{}}
		views[i] = v
		n.SetCommitHook(func(evs []core.Event) {
			v.mu.Lock()
			for _, e := range evs {
				v.seqs = append(v.seqs, e.Seq)
				if n.Committed(e.Seq) {
					v.mine[e.Seq] = string(e.Properties)
				}
			}
			v.mu.Unlock()
		})
	}
	const each = 40
	var wg sync.WaitGroup
	for _, n := range nodes {
		for w := range 3 {
			wg.Go(func() {
				for i := range each {
					err := n.Tx(t.Context(), func(tx store.Tx) error {
						if err := tx.AppendEvent(t.Context(), core.MustEvent("ses_x", "test", fmt.Sprint(n.Node(), w*1000+i))); err != nil {
							return err
						}
						return tx.AppendEvent(t.Context(), core.MustEvent("ses_y", "test", fmt.Sprint(n.Node(), w*1000+i)))
					})
					if err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	want := int64(len(nodes) * 3 * each * 2)
	deadline := time.Now().Add(10 * time.Second)
	for i, v := range views {
		for {
			v.mu.Lock()
			n := len(v.seqs)
			v.mu.Unlock()
			if int64(n) >= want || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		v.mu.Lock()
		if int64(len(v.seqs)) != want {
			t.Errorf("node %d saw %d events, want %d", i, len(v.seqs), want)
		}
		for j, s := range v.seqs {
			if s != int64(j)+1 {
				t.Errorf("node %d: event %d has seq %d (hole or disorder)", i, j, s)
				break
			}
		}
		v.mu.Unlock()
	}
	claimed := map[int64]int{}
	for i, v := range views {
		v.mu.Lock()
		for seq, payload := range v.mine {
			claimed[seq]++
			if !strings.Contains(payload, nodes[i].Node()) {
				t.Errorf("node %s claims event %d, written as %s", nodes[i].Node(), seq, payload)
			}
		}
		v.mu.Unlock()
	}
	for seq := int64(1); seq <= want; seq++ {
		if claimed[seq] != 1 {
			t.Errorf("event %d is Committed by %d nodes", seq, claimed[seq])
		}
	}
}

// TestRenewEndedRun: a run that ended under its lease (the renewal raced
// with its last write) is reported ended, not lost, so the node does not
// believe another one took it.
func TestRenewEndedRun(t *testing.T) {
	t.Parallel()
	url := pgtest.Schema(t)
	a := openNode(t, url, "a")
	run := seedRun(t, a, core.RunRunning)
	c, ok, err := a.Claim(t.Context(), run.ID, time.Minute)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	err = a.Tx(store.WithLease(t.Context(), &c.Lease), func(tx store.Tx) error {
		r, err := tx.Run(t.Context(), run.ID)
		if err != nil {
			return err
		}
		r.State = core.RunSucceeded
		return tx.UpdateRun(t.Context(), r)
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := a.Renew(t.Context(), []store.Lease{c.Lease}, time.Minute)
	if err != nil || len(r.Lost) != 0 || len(r.Ended) != 1 || r.Ended[0] != run.ID {
		t.Errorf("renewal of an ended run = %+v, %v; want it ended, not lost", r, err)
	}
}

// TestGoneOwnersRunsClaimable: a node whose connection to the database is
// gone (its process died) loses its runs at once to the nodes still
// connected, long before its lease would expire; a node that waits for
// leases' TTL (negative grace) does not take them, nor does anyone while
// the owner is connected.
func TestGoneOwnersRunsClaimable(t *testing.T) {
	t.Parallel()
	url := pgtest.Schema(t)
	open := func(node string, grace time.Duration) *postgres.Store {
		s, err := postgres.Open(t.Context(), url, postgres.Options{Node: node, MaxConns: 4, Poll: 50 * time.Millisecond, PresenceGrace: grace})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a := open("a", 0)
	b := open("b", time.Millisecond)
	ttlOnly := open("c", -1)
	run := seedRun(t, a, core.RunRunning)
	if _, ok, err := a.Claim(t.Context(), run.ID, time.Hour); !ok || err != nil {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if got, _ := b.Claimable(t.Context(), 10); len(got) != 0 {
		t.Fatalf("claimable while its owner is connected: %v", got)
	}
	nodes, err := b.Nodes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]int{}
	for _, n := range nodes {
		ids[n.ID] = n.Leases
	}
	if len(ids) != 3 || ids["a"] != 1 || ids["b"] != 0 {
		t.Errorf("nodes = %+v", nodes)
	}
	a.Close()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got, err := b.Claimable(t.Context(), 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 1 && got[0] == run.SessionID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gone owner's run never became claimable: %v", got)
		}
	}
	if _, ok, _ := ttlOnly.Claim(t.Context(), run.ID, time.Hour); ok {
		t.Error("a node without the presence check took a run whose lease is live")
	}
	c, ok, err := b.Claim(t.Context(), run.ID, time.Hour)
	if !ok || err != nil {
		t.Fatalf("claim after the owner left: %v %v", ok, err)
	}
	if c.Lease.Epoch != 2 || c.Prior != store.PriorExpired {
		t.Errorf("claim = %+v", c.Lease)
	}
}
