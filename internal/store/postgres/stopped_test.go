package postgres_test

import (
	"testing"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/postgres"
	"github.com/agentd/agentd/internal/store/postgres/pgtest"
)

// TestClaimStopped: a claim tells a run whose owner stopped — it released
// the lease in a shutdown, its connection is gone, or it was an earlier
// process of the claiming node — from one whose live owner let the lease
// lapse, and from a run parked paused (package pause holds the first kind
// only). A parked run is left out of Claimable while it stays paused and
// listed again once a resume took it out of its pause.
func TestClaimStopped(t *testing.T) {
	t.Parallel()
	url := pgtest.Schema(t)
	clock := newLeaseClock(t, url)
	open := func(node string) *postgres.Store {
		s, err := postgres.Open(t.Context(), url, postgres.Options{Node: node, MaxConns: 4, Poll: 50 * time.Millisecond, PresenceGrace: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	claim := func(s *postgres.Store, runID string, ttl time.Duration) store.Claim {
		t.Helper()
		c, ok, err := s.Claim(t.Context(), runID, ttl)
		if !ok || err != nil {
			t.Fatalf("claim %s by %s: %v %v", runID, s.Node(), ok, err)
		}
		return c
	}
	a, b := open("a"), open("b")
	const short = 200 * time.Millisecond

	lapsed := seedRun(t, a, core.RunRunning)
	claim(a, lapsed.ID, short)
	clock.waitExpired(t, lapsed.ID)
	if c := claim(b, lapsed.ID, time.Hour); c.Stopped || c.Prior != store.PriorExpired {
		t.Errorf("a live node's lapsed lease: %+v", c)
	}

	released := seedRun(t, a, core.RunRunning)
	l := claim(a, released.ID, time.Hour).Lease
	if err := a.Release(t.Context(), []store.Lease{l}); err != nil {
		t.Fatal(err)
	}
	if c := claim(b, released.ID, time.Hour); !c.Stopped || c.Prior != store.PriorReleased {
		t.Errorf("a lease released in a shutdown: %+v", c)
	}

	// b parks the run it took, paused; nobody lists it until a resume.
	paused := seedRun(t, a, core.RunRunning)
	pl := claim(b, paused.ID, time.Hour).Lease
	setPhase(t, b, paused, core.PhasePaused)
	if err := b.Park(t.Context(), pl); err != nil {
		t.Fatal(err)
	}
	if got, _ := a.Claimable(t.Context(), 10); contains(got, paused.SessionID) {
		t.Errorf("a parked paused run is claimable: %v", got)
	}
	setPhase(t, a, paused, core.PhaseRecovering)
	if got, _ := a.Claimable(t.Context(), 10); !contains(got, paused.SessionID) {
		t.Errorf("a parked run resumed is not claimable: %v", got)
	}
	if c := claim(a, paused.ID, time.Hour); c.Stopped {
		t.Errorf("the claim after a resume: %+v", c)
	}

	// An earlier process of node "c" (the same name) versus the current
	// one's own lapsed lease.
	c1 := open("c")
	earlier := seedRun(t, a, core.RunRunning)
	claim(c1, earlier.ID, short)
	c1.Close()
	c2 := open("c")
	clock.waitExpired(t, earlier.ID)
	if c := claim(c2, earlier.ID, short); !c.Stopped {
		t.Errorf("an earlier process's lease: %+v", c)
	}
	clock.waitExpired(t, earlier.ID)
	// A node claims and renews with one TTL (the engine's LeaseTTL).
	if c := claim(c2, earlier.ID, short); c.Stopped {
		t.Errorf("this process's own lapsed lease: %+v", c)
	}

	// A node whose connection is gone.
	d := open("d")
	gone := seedRun(t, a, core.RunRunning)
	claim(d, gone.ID, time.Hour)
	d.Close()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, ok, err := b.Claim(t.Context(), gone.ID, time.Hour); err != nil {
			t.Fatal(err)
		} else if ok {
			if !c.Stopped {
				t.Errorf("a gone node's lease: %+v", c)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the gone node's run was never claimable")
		}
	}
}

// setPhase writes the run with phase.
func setPhase(t *testing.T, s store.Store, run core.Run, phase core.Phase) {
	t.Helper()
	run.Phase = phase
	if err := s.Tx(t.Context(), func(tx store.Tx) error { return tx.UpdateRun(t.Context(), run) }); err != nil {
		t.Fatal(err)
	}
}

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
