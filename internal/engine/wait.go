package engine

import (
	"context"
	"errors"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// WaitRun blocks until the run is terminal or ctx ends, and returns the run.
func (e *Engine) WaitRun(ctx context.Context, runID string) (core.Run, error) {
	e.mu.Lock()
	w, ok := e.waiters[runID]
	if !ok {
		w = &waiter{ch: make(chan struct{})}
		e.waiters[runID] = w
	}
	w.refs++
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		w.refs--
		if w.refs == 0 && e.waiters[runID] == w {
			delete(e.waiters, runID)
		}
		e.mu.Unlock()
	}()
	// A slow poll is the safety net under the wake-ups: on several nodes,
	// for an end whose event this node has not heard yet; on one node,
	// where every end wakes its waiters, it is rarer still (a thousand
	// blocked prompts polling twice a second cost a twentieth of a core).
	every := 10 * time.Second
	if e.cfg.Leaser != nil {
		every = 500 * time.Millisecond
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	// A run that ends here wakes its waiters (runEnded). One that ends on
	// another node is seen through its session's state events; watching
	// the whole log would wake every waiter on every commit, and watching
	// the session on a single node would wake them at each of the run's
	// phases.
	return e.awaitRun(ctx, runID, runWake{
		session: e.cfg.Leaser != nil,
		wake:    w.ch,
		tick:    tick.C,
	})
}

// runWake names what wakes awaitRun to read the run again; a nil channel
// never does.
type runWake struct {
	session  bool             // each commit to the run's session
	wake     <-chan struct{}  // the run's end counted here (runEnded)
	tick     <-chan time.Time // a poll
	done     <-chan struct{}  // the execution stopped: read once more and return
	deadline <-chan time.Time // give up with errRunGoesOn
}

// errRunGoesOn is awaitRun's answer when its deadline passed first.
var errRunGoesOn = errors.New("run did not stop")

// awaitRun reads the run until the store holds it terminal, and returns
// it. It also returns, with the run as read then, once w.done closed,
// w.deadline passed (errRunGoesOn) or ctx ended.
func (e *Engine) awaitRun(ctx context.Context, runID string, w runWake) (core.Run, error) {
	var sessionID string
	for {
		var changed <-chan struct{}
		if sessionID != "" {
			changed = e.hub.Watch(sessionID)
		}
		run, err := e.st.Run(ctx, runID)
		if err != nil || core.TerminalState(run.State) {
			return run, err
		}
		if sessionID == "" && w.session {
			// Watched from here on: the run's end commits after the
			// next read.
			sessionID = run.SessionID
			continue
		}
		select {
		case <-ctx.Done():
			return run, ctx.Err()
		case <-w.wake:
		case <-changed:
		case <-w.tick:
		case <-w.done:
			return e.st.Run(ctx, runID)
		case <-w.deadline:
			return run, errRunGoesOn
		}
	}
}

// WaitIdle blocks until the session is idle (or, with runID, until that
// run ended) and returns the session's status. When ctx ends first it
// returns the current status and ctx's error.
func (e *Engine) WaitIdle(ctx context.Context, sessionID, runID string) (core.SessionStatus, error) {
	for {
		changed := e.hub.Watch(sessionID)
		st, done, err := e.idleYet(ctx, sessionID, runID)
		if ctx.Err() != nil {
			break
		}
		if err != nil || done {
			return st, err
		}
		select {
		case <-ctx.Done():
		case <-changed:
		}
		if ctx.Err() != nil {
			break
		}
	}
	// Report the status as of now, on a context that still works.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	st, err := e.st.SessionStatus(rctx, sessionID)
	if err != nil {
		return st, err
	}
	return st, ctx.Err()
}

// idleYet reads the session's status and reports whether the wait is over.
func (e *Engine) idleYet(ctx context.Context, sessionID, runID string) (core.SessionStatus, bool, error) {
	st, err := e.st.SessionStatus(ctx, sessionID)
	if err != nil {
		return st, false, err
	}
	if runID == "" {
		return st, st.Type == core.StatusIdle, nil
	}
	run, err := e.st.Run(ctx, runID)
	if err != nil {
		return st, false, err
	}
	if run.SessionID != sessionID {
		return st, false, store.ErrNotFound
	}
	return st, core.TerminalState(run.State), nil
}
