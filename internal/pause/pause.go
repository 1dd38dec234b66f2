// Package pause keeps runs that a restart cut off waiting for an explicit
// resume instead of resuming on their own. An operator pauses the whole
// server (agentd.resume "paused", or --resume=paused), a client one
// session (PATCH /session/{id} {"resume": "paused"}; "auto" exempts a
// session from a paused server). At start the engine holds such a
// session's next run in phase paused — busy, not idle: the run is not
// over — with the reason as the status's message; nothing of it executes,
// and its asks' timeouts do not run, until POST /session/{id}/resume
// continues it. An abort ends it as it ends a queued run.
//
// On PostgreSQL the node that takes over a run whose node stopped (killed,
// shut down, or an earlier process of the same node: store.Claim.Stopped)
// applies its own policy the same way, the session's setting first, and
// parks the run's lease until a resume on any node; a run taken over
// because a live node's lease lapsed is not a restart's and goes on.
package pause

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// A session's Resume setting.
const (
	// Paused holds the session's cut-off run for an explicit resume.
	Paused = "paused"
	// Auto resumes it on its own even on a paused server.
	Auto = "auto"
)

// The reasons a paused run's status gives.
const (
	ServerReason  = "the server started paused (agentd.resume): POST /session/{id}/resume continues the run"
	SessionReason = "the session resumes paused after a restart: POST /session/{id}/resume continues the run"
)

// ErrNotPaused is Resume's answer for a session with no paused run.
var ErrNotPaused = errors.New("the session has no paused run")

// Policy says which runs a start holds.
type Policy struct {
	// Server holds every session's run but those set to Auto.
	Server bool
}

// Check reports whether mode is a session's Resume setting.
func Check(mode string) error {
	if mode != "" && mode != Paused && mode != Auto {
		return fmt.Errorf("resume: %q is not paused, auto or empty (the server's setting)", mode)
	}
	return nil
}

// Reason is why a start holds the session's run, "" when it does not.
func (p Policy) Reason(s core.Session) string {
	switch {
	case s.Resume == Paused:
		return SessionReason
	case s.Resume == "" && p.Server:
		return ServerReason
	}
	return ""
}

// Hold marks run, a session's next run found unfinished at start, paused
// when the policy holds its session, and reports whether it did. The
// caller writes the run.
func (p Policy) Hold(ctx context.Context, tx store.Tx, run *core.Run) (bool, error) {
	sess, err := tx.Session(ctx, run.SessionID)
	if err != nil {
		return false, fmt.Errorf("session of run %s: %w", run.ID, err)
	}
	reason := p.Reason(sess)
	if reason == "" {
		return false, nil
	}
	run.Phase, run.Paused = core.PhasePaused, reason
	return true, nil
}

// HoldQueued pauses those of runs, the sessions' next runs that had not
// begun when the server stopped, whose session the policy holds.
func (p Policy) HoldQueued(ctx context.Context, st store.Store, runs []core.Run) error {
	if len(runs) == 0 {
		return nil
	}
	return st.Tx(ctx, func(tx store.Tx) error {
		for _, run := range runs {
			if _, err := p.holdTx(ctx, tx, run); err != nil {
				return err
			}
		}
		return nil
	})
}

// holdTx pauses run in tx when the policy holds its session, and reports
// whether it did.
func (p Policy) holdTx(ctx context.Context, tx store.Tx, run core.Run) (bool, error) {
	held, err := p.Hold(ctx, tx, &run)
	if err != nil || !held {
		return false, err
	}
	return true, write(ctx, tx, run)
}

// HoldRun pauses the queued run, taken over from a node that stopped
// before starting it, when the policy holds its session, and reports
// whether it did. st's context carries the claim's lease.
func (p Policy) HoldRun(ctx context.Context, st store.Store, runID string) (bool, error) {
	held := false
	err := st.Tx(ctx, func(tx store.Tx) error {
		held = false
		run, err := tx.Run(ctx, runID)
		if err != nil || run.State != core.RunQueued {
			return err
		}
		held, err = p.holdTx(ctx, tx, run)
		return err
	})
	return held, err
}

// Resume takes the session's paused run out of its pause: it goes on
// waiting for an ask of it still unanswered, or recovers (a run that had
// begun) or starts (one still queued). The caller then has the session
// executed. ErrNotPaused when the session's next run is not paused.
func Resume(ctx context.Context, st store.Store, sessionID string) error {
	return st.Tx(ctx, func(tx store.Tx) error {
		if err := tx.LockSession(ctx, sessionID); err != nil {
			return err
		}
		runs, err := tx.ActiveRuns(ctx, sessionID)
		if err != nil {
			return err
		}
		if len(runs) == 0 || runs[0].Phase != core.PhasePaused {
			return ErrNotPaused
		}
		run := runs[0]
		run.Paused, run.Phase = "", ""
		if run.State != core.RunQueued {
			run.Phase, run.Attempt, run.RetryMessage, run.NextRetry = core.PhaseRecovering, 0, "", 0
			waiting, err := unanswered(ctx, tx, run.ID)
			if err != nil {
				return err
			}
			if waiting != "" {
				run.Phase = waiting
			}
		}
		return write(ctx, tx, run)
	})
}

// write records run's change with its events, as the engine's writes do:
// run.updated and the session's status.
func write(ctx context.Context, tx store.Tx, run core.Run) error {
	if err := tx.UpdateRun(ctx, run); err != nil {
		return err
	}
	if err := tx.AppendEvent(ctx, core.MustEvent(run.SessionID, core.EventRunUpdated, core.RunProps{Run: run})); err != nil {
		return err
	}
	st := core.StatusOf(&run, nil)
	return tx.AppendEvent(ctx, core.MustEvent(run.SessionID, core.EventSessionStatus,
		core.StatusEventProps{SessionID: run.SessionID, Status: st.Opencode()}))
}

// unanswered is the phase of an ask of the run still waiting for an
// answer, "" when none is.
func unanswered(ctx context.Context, tx store.Tx, runID string) (core.Phase, error) {
	perms, err := tx.RunPermissions(ctx, runID)
	if err != nil {
		return "", err
	}
	for _, p := range perms {
		if p.Reply == "" {
			return core.PhaseWaitingPermission, nil
		}
	}
	qs, err := tx.RunQuestions(ctx, runID)
	if err != nil {
		return "", err
	}
	for _, q := range qs {
		if q.Pending() {
			return core.PhaseWaitingQuestion, nil
		}
	}
	return "", nil
}
