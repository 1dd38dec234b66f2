package undo

import (
	"context"
	"fmt"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/snapshot"
	"github.com/agentd/agentd/internal/store"
)

// Kinds of journaled operations.
const (
	kindRevert   = "revert"
	kindUnrevert = "unrevert"
)

// journal is what a revert writes before it touches a file: enough to
// finish it, or roll it back, after a crash.
type journal struct {
	Kind string `json:"kind"`
	Dir  string `json:"directory"`
	// Point is the revert point written at the end (nil clears it).
	Point   *core.SessionRevert `json:"point,omitempty"`
	Plan    snapshot.Plan       `json:"plan"`
	Started int64               `json:"started"`
}

// Revert undoes the session from messageID on (from partID on within it,
// when set): the files the steps from there changed are put back as they
// were before the first of them, and the session's revert point is set.
// With a revert point already set, the files are first as they were
// before that one. It answers once the revert has ended, or after Wait
// (it goes on; its end is announced by revert.updated).
func (r *Reverter) Revert(ctx context.Context, sessionID, messageID, partID string) (core.Session, error) {
	if err := r.Settle(ctx, sessionID); err != nil {
		return core.Session{}, err
	}
	sess, newest, err := r.idle(ctx, sessionID)
	if err != nil {
		return sess, err
	}
	msgs, err := r.st.Messages(ctx, sessionID, store.MessageQuery{})
	if err != nil {
		return sess, err
	}
	patches, found := patchesFrom(msgs, messageID, partID)
	if !found {
		what := "message " + messageID
		if partID != "" {
			what = "part " + partID + " of message " + messageID
		}
		return sess, fmt.Errorf("%s in session %s: %w", what, sessionID, store.ErrNotFound)
	}
	point := &core.SessionRevert{MessageID: messageID, PartID: partID}
	// The files from the new point on come from the snapshots before
	// their first change; those an earlier point undid (and the new one
	// does not) from the state before that revert.
	want := restoreOrder(patches)
	if sess.Revert != nil {
		point.Snapshot = sess.Revert.Snapshot
		for _, f := range revertedFiles(msgs, *sess.Revert) {
			want = append(want, snapshot.Source{Path: f, Tree: sess.Revert.Snapshot})
		}
	}
	if len(want) == 0 {
		return r.mark(ctx, sessionID, sess.Revert, newest, point)
	}
	j, err := r.plan(ctx, sess, kindRevert, want, point)
	if err != nil {
		return sess, err
	}
	return r.launch(ctx, sess, newest, j)
}

// Unrevert brings back what the session's revert undid: the files as they
// were before it, and the messages.
func (r *Reverter) Unrevert(ctx context.Context, sessionID string) (core.Session, error) {
	if err := r.Settle(ctx, sessionID); err != nil {
		return core.Session{}, err
	}
	sess, newest, err := r.idle(ctx, sessionID)
	if err != nil || sess.Revert == nil {
		return sess, err
	}
	var want []snapshot.Source
	if sess.Revert.Snapshot != "" {
		msgs, err := r.st.Messages(ctx, sessionID, store.MessageQuery{})
		if err != nil {
			return sess, err
		}
		for _, f := range revertedFiles(msgs, *sess.Revert) {
			want = append(want, snapshot.Source{Path: f, Tree: sess.Revert.Snapshot})
		}
	}
	if len(want) == 0 {
		return r.mark(ctx, sessionID, sess.Revert, newest, nil)
	}
	j, err := r.plan(ctx, sess, kindUnrevert, want, nil)
	if err != nil {
		return sess, err
	}
	return r.launch(ctx, sess, newest, j)
}

// plan snapshots the present and decides the restore; nothing is changed.
func (r *Reverter) plan(ctx context.Context, sess core.Session, kind string, want []snapshot.Source, point *core.SessionRevert) (journal, error) {
	if !r.snaps.Enabled() {
		return journal{}, ErrUnavailable
	}
	present, err := r.snaps.Track(ctx, sess.Directory)
	if err != nil {
		return journal{}, fmt.Errorf("snapshot before the revert: %w", err)
	}
	// The state before any revert is what an unrevert goes back to.
	if point != nil && point.Snapshot == "" {
		point.Snapshot = present
	}
	p, err := r.snaps.Plan(ctx, sess.Directory, want, present)
	if err != nil {
		return journal{}, err
	}
	if point != nil {
		point.Kept = keptOf(p)
	}
	return journal{Kind: kind, Dir: sess.Directory, Point: point, Plan: p, Started: r.now()}, nil
}

func keptOf(p snapshot.Plan) []core.RevertKept {
	var out []core.RevertKept
	for _, k := range p.Kept {
		out = append(out, core.RevertKept{Path: k.Path, Reason: k.Reason})
	}
	return out
}

// idle returns the session and its newest run's id, or ErrBusy while it
// has an active run or a revert in progress.
func (r *Reverter) idle(ctx context.Context, sessionID string) (core.Session, string, error) {
	sess, err := r.st.Session(ctx, sessionID)
	if err != nil {
		return sess, "", err
	}
	newest, err := checkIdle(ctx, r.st, sessionID)
	return sess, newest, err
}

// checkIdle refuses a session with an active run or a revert in progress,
// and returns the id of its newest run.
func checkIdle(ctx context.Context, rd store.Reader, sessionID string) (string, error) {
	active, err := rd.ActiveRuns(ctx, sessionID)
	if err != nil {
		return "", err
	}
	if len(active) > 0 {
		return "", ErrBusy
	}
	if err := NotReverting(ctx, rd, sessionID); err != nil {
		return "", err
	}
	runs, err := rd.Runs(ctx, sessionID, 1)
	if err != nil || len(runs) == 0 {
		return "", err
	}
	return runs[0].ID, nil
}

// stillAsPlanned refuses, inside the transaction that commits to a revert,
// a session that changed since the revert was planned: a run admitted or
// ended, another revert point set.
func stillAsPlanned(ctx context.Context, tx store.Tx, sessionID string, rev *core.SessionRevert, newest string) (core.Session, error) {
	if err := tx.LockSession(ctx, sessionID); err != nil {
		return core.Session{}, err
	}
	sess, err := tx.Session(ctx, sessionID)
	if err != nil {
		return sess, err
	}
	now, err := checkIdle(ctx, tx, sessionID)
	if err != nil {
		return sess, err
	}
	if now != newest || !sameRevert(sess.Revert, rev) {
		return sess, fmt.Errorf("%w: it changed while the revert was prepared; retry", ErrBusy)
	}
	return sess, nil
}

func sameRevert(a, b *core.SessionRevert) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.MessageID == b.MessageID && a.PartID == b.PartID && a.Snapshot == b.Snapshot
}

// mark sets (or clears) the revert point of a revert that touches no file.
func (r *Reverter) mark(ctx context.Context, sessionID string, was *core.SessionRevert, newest string, point *core.SessionRevert) (core.Session, error) {
	var out core.Session
	err := r.st.Tx(ctx, func(tx store.Tx) error {
		sess, err := stillAsPlanned(ctx, tx, sessionID, was, newest)
		if err != nil {
			return err
		}
		out, err = writePoint(ctx, tx, sess, point, r.now())
		return err
	})
	if err == nil {
		r.changed(sessionID)
	}
	return out, err
}

// changed tells Options.Changed that a session's revert point moved.
func (r *Reverter) changed(sessionID string) {
	if r.o.Changed == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r.o.Changed(ctx, sessionID)
}

// writePoint writes the session's revert point and says so.
func writePoint(ctx context.Context, tx store.Tx, sess core.Session, point *core.SessionRevert, now int64) (core.Session, error) {
	sess.Revert = point
	sess.Time.Updated = now
	if err := tx.UpdateSession(ctx, sess); err != nil {
		return sess, err
	}
	ev, err := core.NewEvent(sess.ID, core.EventSessionUpdated, core.SessionProps{SessionID: sess.ID, Info: sess})
	if err != nil {
		return sess, err
	}
	return sess, tx.AppendEvent(ctx, ev)
}

// patchesFrom returns the patch parts of the session from messageID on
// (from partID on within it), and whether that point exists.
func patchesFrom(msgs []core.MessageWithParts, messageID, partID string) ([]core.Part, bool) {
	var out []core.Part
	found := false
	for _, m := range msgs {
		if m.Info.ID == messageID {
			found = partID == ""
		}
		for _, p := range m.Parts {
			if m.Info.ID == messageID && p.ID == partID {
				found = true
			}
			if found && p.Type == core.PartPatch {
				out = append(out, p)
			}
		}
	}
	return out, found
}

// PointSnapshot is the snapshot of the session's files at its revert point
// rev: the one the first step reverted began from (the snapshot its patch
// names), which is what the revert put the files it reverted back to. ok
// is false when nothing from the point on changed files.
func PointSnapshot(msgs []core.MessageWithParts, rev core.SessionRevert) (string, bool) {
	patches, _ := patchesFrom(msgs, rev.MessageID, rev.PartID)
	for _, p := range patches {
		if p.Hash != "" {
			return p.Hash, true
		}
	}
	return "", false
}

// restoreOrder lists each file the patches changed once, with the
// snapshot of its first change: the state before the reverted steps.
func restoreOrder(patches []core.Part) []snapshot.Source {
	seen := map[string]bool{}
	var out []snapshot.Source
	for _, p := range patches {
		for _, f := range p.Files {
			if !seen[f] {
				seen[f] = true
				out = append(out, snapshot.Source{Path: f, Tree: p.Hash})
			}
		}
	}
	return out
}

// revertedFiles are the files a revert point undid.
func revertedFiles(msgs []core.MessageWithParts, rev core.SessionRevert) []string {
	patches, _ := patchesFrom(msgs, rev.MessageID, rev.PartID)
	var files []string
	for _, s := range restoreOrder(patches) {
		files = append(files, s.Path)
	}
	return files
}
