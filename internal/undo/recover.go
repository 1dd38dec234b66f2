package undo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/agentd/agentd/internal/store"
)

// errTaken is a journal another node took over first.
var errTaken = errors.New("taken over by another node")

// Settle finishes (or rolls back) the session's revert left in progress by
// a node that died, once its journal's lease has expired, so that the
// operation asking can go on; it answers ErrReverting while a live revert
// is in progress, and nil when there is none.
func (r *Reverter) Settle(ctx context.Context, sessionID string) error {
	rec, err := r.st.RevertJournal(ctx, sessionID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if r.local(sessionID) || rec.Expires > r.now() {
		return ErrReverting
	}
	return r.takeOver(ctx, rec)
}

// NotReverting returns ErrReverting while the session has a revert in
// progress: what admits a prompt checks it in its transaction.
func NotReverting(ctx context.Context, rd store.Reader, sessionID string) error {
	_, err := rd.RevertJournal(ctx, sessionID)
	switch {
	case err == nil:
		return ErrReverting
	case errors.Is(err, store.ErrNotFound):
		return nil
	}
	return err
}

// local reports whether a revert of the session is carried out here.
func (r *Reverter) local(sessionID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ops[sessionID] != nil
}

// recoverAll takes over the journals left by dead processes: at start on
// one node every journal (one process owns the database), on several
// this node's own and the expired ones, later only expired ones.
func (r *Reverter) recoverAll(ctx context.Context, atStart bool) error {
	before := r.now()
	if atStart {
		before = math.MaxInt64
	}
	recs, err := r.st.RevertJournals(ctx, before)
	if err != nil {
		return err
	}
	for _, rec := range recs {
		if r.o.Shared && rec.Owner != r.o.Node && rec.Expires >= r.now() || r.local(rec.SessionID) {
			continue
		}
		if err := r.takeOver(ctx, rec); err != nil && !errors.Is(err, ErrBusy) {
			return fmt.Errorf("session %s: %w", rec.SessionID, err)
		}
	}
	return nil
}

// takeOver makes rec this node's, if nobody has taken it meanwhile, then
// finishes or rolls back the revert from its journal and waits for its
// end. A revert that ends rolled back or failed is recorded so and is no
// error of the operation that asked.
func (r *Reverter) takeOver(ctx context.Context, rec store.RevertJournal) error {
	expires := r.now() + r.o.TTL.Milliseconds()
	err := r.st.Tx(ctx, func(tx store.Tx) error {
		if err := tx.LockSession(ctx, rec.SessionID); err != nil {
			return err
		}
		cur, err := tx.RevertJournal(ctx, rec.SessionID)
		if err != nil {
			return err
		}
		if cur.ID != rec.ID || cur.Owner != rec.Owner || cur.Expires != rec.Expires {
			return errTaken
		}
		return tx.TakeRevertJournal(ctx, rec.SessionID, rec.ID, r.o.Node, expires)
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil // ended meanwhile
	case errors.Is(err, errTaken):
		return ErrReverting
	case err != nil:
		return err
	}
	rec.Owner, rec.Expires = r.o.Node, expires
	r.log.Warn("taking over a revert cut off by a crash", "session", rec.SessionID, "revert", rec.ID)
	var j journal
	if err := json.Unmarshal(rec.Data, &j); err != nil {
		// Unreadable: nothing can be done with the files; the journal
		// goes, and the event says so.
		_, ferr := r.finish(rec, journal{Kind: "unknown"}, stateFailed, fmt.Errorf("unreadable journal: %w", err), true)
		return ferr
	}
	o := r.start(rec, j, true)
	select {
	case <-o.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	var fe *FailedError
	if o.err != nil && !errors.As(o.err, &fe) {
		return o.err
	}
	return nil
}

// sweep takes over, every TTL/4, the reverts of nodes that died.
func (r *Reverter) sweep() {
	defer r.wg.Done()
	t := time.NewTicker(max(r.o.TTL/4, time.Second))
	defer t.Stop()
	for {
		select {
		case <-r.quit:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(r.ctx, r.o.TTL)
		if err := r.recoverAll(ctx, false); err != nil {
			r.log.Warn("take over reverts of nodes that died", "err", err)
		}
		cancel()
	}
}
