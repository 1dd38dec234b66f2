package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// abortCause is the cancel cause of a run that must end interrupted.
type abortCause struct{ reason core.EndReason }

func (a *abortCause) Error() string { return "run " + string(a.reason) }

// Abort ends every non-terminal run of the session interrupted/aborted and
// reports whether there was one. It returns once the runs have ended (or
// after a bounded wait).
func (e *Engine) Abort(ctx context.Context, sessionID string) (bool, error) {
	if _, err := e.st.Session(ctx, sessionID); err != nil {
		return false, err
	}
	runs, err := e.st.ActiveRuns(ctx, sessionID)
	if err != nil {
		return false, err
	}
	if len(runs) == 0 {
		return false, nil
	}
	// Queued runs first, so that ending the running one does not start them.
	for i := len(runs) - 1; i >= 0; i-- {
		if err := e.abortRun(ctx, runs[i].ID, core.ReasonAborted); err != nil {
			return true, err
		}
	}
	return true, nil
}

// AbortRun ends one run of the session interrupted/aborted, whether it
// executes or waits in the queue. It is a no-op for a run that has ended.
func (e *Engine) AbortRun(ctx context.Context, sessionID, runID string) error {
	run, err := e.st.Run(ctx, runID)
	if err != nil {
		return err
	}
	if run.SessionID != sessionID {
		return store.ErrNotFound
	}
	if core.TerminalState(run.State) {
		return nil
	}
	return e.abortRun(ctx, runID, core.ReasonAborted)
}

// abortRun ends one run interrupted with the given reason. A run executing
// here is cancelled and awaited; a queued one is ended directly. It
// returns once the store holds the run ended.
func (e *Engine) abortRun(ctx context.Context, runID string, reason core.EndReason) error {
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	// Until it returns, every execution of the run here starts cancelled:
	// one that could not write the run's end leaves it to be executed
	// again, and the abort must not be lost in between.
	cause := &abortCause{reason: reason}
	e.mu.Lock()
	if e.aborts == nil {
		e.aborts = make(map[string]*abortCause)
	}
	e.aborts[runID] = cause
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		if e.aborts[runID] == cause {
			delete(e.aborts, runID)
		}
		e.mu.Unlock()
	}()
	for {
		e.mu.Lock()
		h := e.handles[runID]
		closing := e.closing
		e.mu.Unlock()
		if h == nil && closing {
			// Runs stopped by the shutdown stay non-terminal; the next
			// start resumes them.
			return ErrClosed
		}
		if h != nil {
			h.cancel(cause)
			if ended, err := e.awaitEnd(ctx, runID, h.done, deadline.C); ended || err != nil {
				return err
			}
			// The execution stopped without an end: one that could not
			// write it is executed again, and that execution is aborted too.
			continue
		}
		_, changed := e.hub.Head()
		done, err := e.finishQueued(ctx, runID, reason)
		if err != nil || done {
			return err
		}
		if e.cfg.Leaser != nil {
			return e.abortElsewhere(ctx, runID, reason, deadline.C)
		}
		// It is running but its handle is not visible yet (it is being
		// started, or ending); look again when the log moves.
		select {
		case <-changed:
		case <-time.After(10 * time.Millisecond):
		case <-e.baseCtx.Done():
		case <-deadline.C:
			return fmt.Errorf("abort run %s: could not reach the run", runID)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// awaitEnd waits until the store holds the cancelled run ended, which is
// before its execution's bookkeeping after the end (the session's diff
// summary, git processes) is done; or until the execution stopped (done),
// then reporting whether the run ended.
func (e *Engine) awaitEnd(ctx context.Context, runID string, done <-chan struct{}, deadline <-chan time.Time) (bool, error) {
	run, err := e.awaitRun(ctx, runID, runWake{session: true, done: done, deadline: deadline})
	if errors.Is(err, errRunGoesOn) {
		return false, fmt.Errorf("abort run %s: %w", runID, err)
	}
	return err == nil && core.TerminalState(run.State), err
}

// abortElsewhere ends a run that executes on another node, or on none (its
// owner died): the request is durable, its owner ends the run as a local
// abort, and a node that claims an abandoned run ends it instead of
// resuming it. It returns once the run has ended.
func (e *Engine) abortElsewhere(ctx context.Context, runID string, reason core.EndReason, deadline <-chan time.Time) error {
	if err := e.cfg.Leaser.RequestAbort(ctx, runID, reason); err != nil {
		return err
	}
	run, err := e.st.Run(ctx, runID)
	if err != nil {
		return err
	}
	// Nobody may hold the run: then this node claims it and ends it.
	e.kick(run.SessionID)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-deadline:
			cancel()
		case <-wctx.Done():
		}
	}()
	if _, err := e.WaitRun(wctx, runID); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("abort run %s: run did not stop", runID)
	}
	return nil
}
