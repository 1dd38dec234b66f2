package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// Several nodes share a database through run leases (store.Leaser). A
// node claims a run before it executes it; the claim of a run whose owner
// died is the same crash recovery a restarted single node does (repair);
// every write the run makes carries its lease and is refused once another
// node owns the run, and a node that cannot renew stops its runs before
// its leases expire. With a single-node store (Leaser nil) none of this
// runs and Start recovers every cut-off run itself.

// errFenced is the cancel cause of a run whose lease this node lost: it
// writes nothing more and leaves the run to its new owner.
var errFenced = errors.New("lease lost to another node")

// leaseMargin is how long before its local deadline a run whose lease
// could not be renewed is stopped (a fifth of the TTL, at most 2 s): the
// database's clock may run a little ahead of this node's.
func (e *Engine) leaseMargin() time.Duration {
	return min(e.cfg.LeaseTTL/5, 2*time.Second)
}

// claimResult says what a claim left the node to do.
type claimResult int

const (
	// claimMine: execute the run under the lease.
	claimMine claimResult = iota
	// claimTaken: another live node holds the run (or it has ended).
	claimTaken
	// claimEnded: the run was ended here, as a client had asked before
	// anyone resumed it; go on with the session's next run.
	claimEnded
)

// claim takes the run for this node.
func (e *Engine) claim(run core.Run) (*store.Lease, claimResult, error) {
	ctx, cancel := detached(e.baseCtx)
	defer cancel()
	deadline := time.Now().Add(e.cfg.LeaseTTL)
	c, ok, err := e.cfg.Leaser.Claim(ctx, run.ID, e.cfg.LeaseTTL)
	if err != nil || !ok {
		return nil, claimTaken, err
	}
	lease := &c.Lease
	lease.Lost = func() { e.fence(run.ID) }
	ctx = store.WithLease(ctx, lease)
	held := false // for an explicit resume: its node stopped (package pause)
	if c.Stopped && c.Run.State == core.RunQueued {
		if held, err = e.cfg.Pause.HoldRun(ctx, e.st, run.ID); err != nil {
			return nil, claimTaken, fmt.Errorf("hold run %s: %w", run.ID, err)
		}
	}
	if c.Prior != store.PriorNone && c.Run.State != core.RunQueued {
		// Taken over from a node that died, hung or shut down: the same
		// repair as after a restart. A clean shutdown does not count
		// against the crash-loop budget.
		var ends ends
		action := ""
		err := e.st.Tx(ctx, func(tx store.Tx) error {
			ends, action = ends[:0], ""
			cur, err := tx.Run(ctx, run.ID)
			if err != nil || core.TerminalState(cur.State) {
				return err
			}
			action, err = e.repair(ctx, tx, cur, c.Prior == store.PriorExpired, c.Stopped, &ends)
			return err
		})
		held = action == string(core.PhasePaused)
		if err != nil {
			return nil, claimTaken, fmt.Errorf("take over run %s: %w", run.ID, err)
		}
		if action != "" {
			e.cfg.Metrics.Recovered(action)
		}
		e.ended(ends)
		e.log.Info("took over run", "run", run.ID, "session", run.SessionID, "epoch", lease.Epoch,
			"released", c.Prior == store.PriorReleased)
	}
	if c.AbortReason != "" {
		var ends ends
		err := e.st.Tx(ctx, func(tx store.Tx) error {
			ends = ends[:0]
			cur, err := tx.Run(ctx, run.ID)
			if err != nil || core.TerminalState(cur.State) {
				return err
			}
			return e.finishTx(ctx, tx, cur, outcome{state: core.RunInterrupted, reason: c.AbortReason,
				err: core.AbortedError("The operation was aborted.")}, nil, nil, &ends)
		})
		if err != nil {
			return nil, claimTaken, fmt.Errorf("end aborted run %s: %w", run.ID, err)
		}
		e.ended(ends)
		e.runEnded(run.ID)
		return nil, claimEnded, nil
	}
	if held { // nobody holds it until POST /session/{id}/resume
		return nil, claimTaken, e.cfg.Leaser.Park(ctx, *lease)
	}
	e.mu.Lock()
	e.leases[run.ID] = &leaseState{lease: lease, until: deadline}
	e.mu.Unlock()
	return lease, claimMine, nil
}

// leaseState is a lease this node holds and the local time by which it
// must have been renewed.
type leaseState struct {
	lease *store.Lease
	until time.Time
}

// heldLease returns the lease this node holds on the run, if any.
func (e *Engine) heldLease(runID string) *store.Lease {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ls := e.leases[runID]; ls != nil {
		return ls.lease
	}
	return nil
}

// dropLease forgets a lease once its run stopped executing here.
func (e *Engine) dropLease(runID string) {
	e.mu.Lock()
	delete(e.leases, runID)
	e.mu.Unlock()
}

// fence stops a run whose lease was lost: its tool processes are killed by
// the cancellation, and it writes nothing more.
func (e *Engine) fence(runID string) {
	e.mu.Lock()
	h := e.handles[runID]
	e.mu.Unlock()
	if h != nil {
		h.cancel(errFenced)
	}
}

// abortRequested is called when a client on another node asked for a run
// to end: the owner ends it like a local abort.
func (e *Engine) abortRequested(runID string, reason core.EndReason) {
	e.mu.Lock()
	h := e.handles[runID]
	e.mu.Unlock()
	if h != nil {
		h.cancel(&abortCause{reason: reason})
	}
}

// leaseLoop renews this node's leases every LeaseRenew in one statement,
// delivers abort requests found on renewal, and claims runs nobody holds
// (admitted on a node that died before starting them, or cut off) every
// ClaimPoll. Stopping the runs whose lease could not be renewed in time is
// expireLoop's, so that a renewal stuck on the database cannot delay it.
func (e *Engine) leaseLoop() {
	defer e.bg.Done()
	tick := time.NewTicker(min(e.cfg.ClaimPoll, e.cfg.LeaseRenew, time.Second))
	defer tick.Stop()
	lastRenew, lastClaim := time.Now(), time.Time{}
	for {
		select {
		case <-e.baseCtx.Done():
			return
		case <-tick.C:
		}
		now := time.Now()
		if now.Sub(lastRenew) >= e.cfg.LeaseRenew {
			lastRenew = now
			e.renew()
		}
		if now.Sub(lastClaim) >= e.cfg.ClaimPoll {
			lastClaim = now
			e.claimIdle()
		}
	}
}

// expireLoop stops the runs whose lease this node could not renew, a
// margin before the lease's end. It looks four times per margin: looking
// once a second let a 2 s lease (0.4 s margin) run out unnoticed, and the
// node then learnt from the database that its lease was gone.
func (e *Engine) expireLoop() {
	defer e.bg.Done()
	tick := time.NewTicker(max(e.leaseMargin()/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-e.baseCtx.Done():
			return
		case <-tick.C:
			e.expire()
		}
	}
}

func (e *Engine) renew() {
	e.mu.Lock()
	leases := make([]store.Lease, 0, len(e.leases))
	for _, ls := range e.leases {
		leases = append(leases, *ls.lease)
	}
	e.mu.Unlock()
	if len(leases) == 0 {
		return
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(e.baseCtx, e.cfg.LeaseRenew)
	r, err := e.cfg.Leaser.Renew(ctx, leases, e.cfg.LeaseTTL)
	cancel()
	if err != nil {
		// expire stops the runs once their deadline comes near.
		e.log.Warn("renew leases", "count", len(leases), "err", err)
		return
	}
	lost := map[string]bool{}
	for _, id := range r.Lost {
		lost[id] = true
	}
	e.mu.Lock()
	for _, l := range leases {
		if ls := e.leases[l.RunID]; ls != nil && !lost[l.RunID] && ls.lease.Epoch == l.Epoch {
			ls.until = start.Add(e.cfg.LeaseTTL)
		}
	}
	e.mu.Unlock()
	for _, id := range r.Lost {
		e.log.Warn("lease lost; stopping the run here", "run", id)
		e.fence(id)
	}
	// A run that ended is dropped by its executor; one that no executor
	// holds any more (kept over a storage stall, then ended by a client)
	// is dropped here.
	e.mu.Lock()
	for _, id := range r.Ended {
		if e.handles[id] == nil {
			delete(e.leases, id)
		}
	}
	e.mu.Unlock()
	for id, reason := range r.Aborts {
		e.abortRequested(id, reason)
	}
}

// expire stops the runs whose lease this node could not renew before its
// deadline, before any other node may claim them.
func (e *Engine) expire() {
	now := time.Now()
	var stale []string
	// Decided and dropped under one lock: renew runs beside this, and a
	// lease it extended between a check and a later drop would be
	// fenced though renewed.
	e.mu.Lock()
	for id, ls := range e.leases {
		if now.After(ls.until.Add(-e.leaseMargin())) {
			stale = append(stale, id)
			delete(e.leases, id)
		}
	}
	e.mu.Unlock()
	for _, id := range stale {
		e.log.Warn("lease could not be renewed in time; stopping the run here", "run", id)
		e.fence(id)
	}
}

// claimIdle kicks the sessions whose next run nobody holds; their drive
// loop claims the run (claiming is conditional: of several nodes, one wins).
func (e *Engine) claimIdle() {
	ctx, cancel := context.WithTimeout(e.baseCtx, 10*time.Second)
	defer cancel()
	sessions, err := e.cfg.Leaser.Claimable(ctx, 100)
	if err != nil {
		if e.baseCtx.Err() == nil {
			e.log.Debug("list claimable runs", "err", err)
		}
		return
	}
	for _, s := range sessions {
		e.kick(s)
	}
}

// releaseAll gives up the leases of the runs this node stopped at shutdown,
// so that another node continues them at once.
func (e *Engine) releaseAll(leases []store.Lease) {
	if len(leases) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(e.baseCtx), 5*time.Second)
	defer cancel()
	if err := e.cfg.Leaser.Release(ctx, leases); err != nil {
		e.log.Warn("release leases; other nodes take the runs over when they expire", "count", len(leases), "err", err)
		return
	}
	e.log.Info("released leases", "count", len(leases))
}

// Leases returns how many run leases this node holds (0 on a single node).
func (e *Engine) Leases() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.leases)
}
