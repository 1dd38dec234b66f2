package undo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// Terminal states of a revert, in its revert.updated event.
const (
	stateStarted    = "started"
	stateFinished   = "finished"
	stateRolledBack = "rolled_back"
	stateFailed     = "failed"
)

// RevertProps is the payload of revert.updated.
type RevertProps struct {
	SessionID string            `json:"sessionID"`
	RevertID  string            `json:"revertID"`
	Kind      string            `json:"kind"`
	State     string            `json:"state"`
	Files     int               `json:"files"`
	Kept      []core.RevertKept `json:"kept,omitempty"`
	Error     string            `json:"error,omitempty"`
	// Recovered: the revert was cut off (its node crashed or died) and
	// finished or rolled back from its journal.
	Recovered bool `json:"recovered,omitempty"`
}

// ErrStopped ends a revert whose server is stopping: its journal stays
// for the next start, which finishes it.
var ErrStopped = errors.New("the server is stopping; the revert is finished at its next start")

// launch journals the revert, in a transaction that checks the session is
// still as planned, then carries it out detached from ctx and waits for
// its end (up to Wait).
func (r *Reverter) launch(ctx context.Context, sess core.Session, newest string, j journal) (core.Session, error) {
	data, err := json.Marshal(j)
	if err != nil {
		return sess, fmt.Errorf("encode revert journal: %w", err)
	}
	rec := store.RevertJournal{SessionID: sess.ID, ID: core.NewID("rvt", false), Owner: r.o.Node, Expires: r.now() + r.o.TTL.Milliseconds(), Data: data}
	r.mu.Lock()
	stopped := r.stopped
	r.mu.Unlock()
	if stopped {
		return sess, fmt.Errorf("revert: %w", ErrStopped)
	}
	// From here on the client's going away changes nothing: a journal
	// committed as its request was cancelled is carried out all the same.
	jctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	err = r.st.Tx(jctx, func(tx store.Tx) error {
		if _, err := stillAsPlanned(jctx, tx, sess.ID, sess.Revert, newest); err != nil {
			return err
		}
		if err := tx.PutRevertJournal(jctx, rec); errors.Is(err, store.ErrConflict) {
			return ErrReverting
		} else if err != nil {
			return err
		}
		return appendRevertEvent(jctx, tx, rec, j, stateStarted, nil, false)
	})
	cancel()
	if err != nil {
		return sess, err
	}
	o := r.start(rec, j, false)
	t := time.NewTimer(r.o.Wait)
	defer t.Stop()
	select {
	case <-o.done:
		return o.sess, o.err
	case <-t.C:
		return sess, fmt.Errorf("%w: the revert is still running; it ends on its own (revert.updated)", ErrReverting)
	case <-ctx.Done():
		return sess, ctx.Err()
	}
}

// start carries out a journaled revert in a goroutine of its own.
func (r *Reverter) start(rec store.RevertJournal, j journal, recovered bool) *op {
	o := &op{done: make(chan struct{})}
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		o.err = ErrStopped
		close(o.done)
		return o
	}
	r.ops[rec.SessionID] = o
	r.wg.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.wg.Done()
		o.sess, o.err = r.carryOut(rec, j, recovered)
		r.mu.Lock()
		delete(r.ops, rec.SessionID)
		r.mu.Unlock()
		close(o.done)
	}()
	return o
}

// carryOut applies the plan, and rolls it back when that fails, each
// bounded by Deadline, then records the end. A revert whose server stops
// meanwhile is left to the next start.
func (r *Reverter) carryOut(rec store.RevertJournal, j journal, recovered bool) (core.Session, error) {
	if r.crashed("journaled", 0) {
		return core.Session{}, ErrStopped
	}
	ctx, cancel := context.WithTimeout(r.ctx, r.o.Deadline)
	err := r.snaps.Apply(ctx, j.Dir, j.Plan, false, func(done int) error {
		if r.crashed("file", done) {
			return ErrStopped
		}
		return nil
	})
	cancel()
	if errors.Is(err, ErrStopped) || r.ctx.Err() != nil {
		return core.Session{}, ErrStopped
	}
	if err == nil {
		if r.crashed("applied", 0) {
			return core.Session{}, ErrStopped
		}
		if j.Kind == kindRevert {
			j.Point.Diff = r.diff(j)
		}
		return r.finish(rec, j, stateFinished, nil, recovered)
	}
	r.log.Warn("revert failed; rolling it back", "session", rec.SessionID, "revert", rec.ID, "err", err)
	bctx, cancel := context.WithTimeout(r.ctx, r.o.Deadline)
	berr := r.snaps.Apply(bctx, j.Dir, j.Plan, true, nil)
	cancel()
	if r.ctx.Err() != nil {
		return core.Session{}, ErrStopped
	}
	if berr != nil {
		return r.finish(rec, j, stateFailed, fmt.Errorf("%w (rolling back: %v)", err, berr), recovered)
	}
	return r.finish(rec, j, stateRolledBack, err, recovered)
}

func (r *Reverter) crashed(stage string, done int) bool {
	return r.crash != nil && r.crash(stage, done)
}

// diff is the revert's unified diff: from the state before it to now.
func (r *Reverter) diff(j journal) string {
	ctx, cancel := context.WithTimeout(r.ctx, r.o.Deadline)
	defer cancel()
	now, err := r.snaps.Track(ctx, j.Dir)
	if err != nil {
		return ""
	}
	diffs, err := r.snaps.Diff(ctx, j.Dir, j.Point.Snapshot, now)
	if err != nil {
		return ""
	}
	var sb strings.Builder
	for _, d := range diffs {
		sb.WriteString(d.Patch)
	}
	return sb.String()
}

// finish records a revert's end in one transaction, on a context of its
// own: the revert point (when it finished), the journal deleted, and
// revert.updated; then logs it. A journal that is no longer this node's
// (taken over after its lease expired) is left to its new owner.
func (r *Reverter) finish(rec store.RevertJournal, j journal, state string, cause error, recovered bool) (core.Session, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var sess core.Session
	err := r.st.Tx(ctx, func(tx store.Tx) error {
		if err := tx.LockSession(ctx, rec.SessionID); err != nil {
			return err
		}
		cur, err := tx.RevertJournal(ctx, rec.SessionID)
		if err != nil || cur.ID != rec.ID || cur.Owner != r.o.Node {
			return fmt.Errorf("revert %s of session %s is no longer this node's: %w", rec.ID, rec.SessionID, errors.Join(err, errLost))
		}
		if sess, err = tx.Session(ctx, rec.SessionID); err != nil {
			return err
		}
		if state == stateFinished {
			if sess, err = writePoint(ctx, tx, sess, j.Point, r.now()); err != nil {
				return err
			}
		}
		if err := tx.DeleteRevertJournal(ctx, rec.SessionID, rec.ID); err != nil {
			return err
		}
		return appendRevertEvent(ctx, tx, rec, j, state, cause, recovered)
	})
	r.logEnd(rec, j, state, cause, recovered, err)
	if err == nil && state == stateFinished {
		r.changed(rec.SessionID)
	}
	switch {
	case err != nil:
		return sess, fmt.Errorf("record the revert's end: %w", err)
	case state == stateRolledBack:
		return sess, &FailedError{Err: cause, RolledBack: true}
	case state == stateFailed:
		return sess, &FailedError{Err: cause}
	}
	return sess, nil
}

// errLost is a revert taken over by another node.
var errLost = errors.New("taken over")

func (r *Reverter) logEnd(rec store.RevertJournal, j journal, state string, cause error, recovered bool, err error) {
	args := []any{"session", rec.SessionID, "revert", rec.ID, "kind", j.Kind, "state", state, "files", len(j.Plan.Steps),
		"kept", len(j.Plan.Kept), "recovered", recovered}
	switch {
	case err != nil:
		r.log.Error("record the end of a revert; the next start or takeover finishes it", append(args, "err", err)...)
	case cause != nil:
		r.log.Warn("revert ended without its changes", append(args, "err", cause)...)
	case recovered:
		r.log.Warn("revert cut off by a crash finished from its journal", args...)
	default:
		r.log.Info("revert finished", args...)
	}
}

func appendRevertEvent(ctx context.Context, tx store.Tx, rec store.RevertJournal, j journal, state string, cause error, recovered bool) error {
	props := RevertProps{SessionID: rec.SessionID, RevertID: rec.ID, Kind: j.Kind, State: state, Files: len(j.Plan.Steps),
		Kept: keptOf(j.Plan), Recovered: recovered}
	if cause != nil {
		props.Error = cause.Error()
	}
	ev, err := core.NewEvent(rec.SessionID, core.EventRevertUpdated, props)
	if err != nil {
		return err
	}
	return tx.AppendEvent(ctx, ev)
}
