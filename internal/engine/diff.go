package engine

import (
	"context"
	"errors"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/snapshot"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/undo"
)

// Diff is what a session changed in its workspace, file by file: with
// messageID, the turn of that message's run (from its first snapshot to
// its last), else the whole session (from its first run's first snapshot
// to its latest run's last). Without snapshots it is empty.
func (e *Engine) Diff(ctx context.Context, sessionID, messageID string) ([]snapshot.FileDiff, error) {
	out := []snapshot.FileDiff{}
	err := e.DiffEach(ctx, sessionID, messageID, func(d snapshot.FileDiff) error {
		out = append(out, d)
		return nil
	})
	return out, err
}

// DiffEach calls fn with each file of Diff's answer as git reports it
// (snapshot.Store.DiffEach: bounded, one file held at a time). A file the
// operator's rules deny to read comes without its patch: its name, status
// and counts only.
func (e *Engine) DiffEach(ctx context.Context, sessionID, messageID string, fn func(snapshot.FileDiff) error) error {
	sess, err := e.st.Session(ctx, sessionID)
	if err != nil {
		return err
	}
	from, to, err := e.diffRange(ctx, sess, messageID)
	if err != nil || !e.cfg.Snapshots.Enabled() {
		return err
	}
	return e.cfg.Snapshots.DiffEach(ctx, sess.Directory, from, to, func(d snapshot.FileDiff) error {
		if e.Denied("read", d.File) {
			d.Patch = ""
		}
		return fn(d)
	})
}

// diffRange finds the snapshots a diff spans. Under a revert point the
// session's diff ends where the point put its files (undo.PointSnapshot):
// what the revert undid is not counted; an unrevert brings it back.
func (e *Engine) diffRange(ctx context.Context, sess core.Session, messageID string) (from, to string, err error) {
	sessionID := sess.ID
	if messageID != "" {
		m, err := e.st.Message(ctx, sessionID, messageID)
		if err != nil {
			return "", "", err
		}
		if m.Info.RunID == "" {
			return "", "", nil
		}
		run, err := e.st.Run(ctx, m.Info.RunID)
		if errors.Is(err, store.ErrNotFound) {
			return "", "", nil
		}
		return run.Snapshot, run.SnapshotEnd, err
	}
	runs, err := e.st.Runs(ctx, sessionID, 0)
	if err != nil {
		return "", "", err
	}
	// Newest first: the last snapshot is the newest run's that has one,
	// the first the oldest run's.
	for _, r := range runs {
		if to == "" && r.SnapshotEnd != "" {
			to = r.SnapshotEnd
		}
		if r.Snapshot != "" {
			from = r.Snapshot
		}
	}
	if sess.Revert != nil {
		msgs, err := e.st.Messages(ctx, sessionID, store.MessageQuery{})
		if err != nil {
			return "", "", err
		}
		if at, ok := undo.PointSnapshot(msgs, *sess.Revert); ok {
			to = at
		}
	}
	return from, to, nil
}

// summarize records, after a run that changed files, what the session has
// changed so far (summarizeSession).
func (e *Engine) summarize(ctx context.Context, run core.Run) {
	if run.SnapshotEnd == "" || run.SnapshotEnd == run.Snapshot || !e.cfg.Snapshots.Enabled() {
		return
	}
	e.summarizeSession(ctx, run.SessionID)
}

// summarizeSession records what the session has changed so far: the
// session's summary (additions, deletions, files) and a session.diff
// event with the diff, as opencode's clients expect. A revert and an
// unrevert call it too (undo.Options.Changed).
func (e *Engine) summarizeSession(ctx context.Context, sessionID string) {
	if !e.cfg.Snapshots.Enabled() {
		return
	}
	diffs, err := e.Diff(ctx, sessionID, "")
	if err != nil {
		e.log.Warn("session diff", "session", sessionID, "err", err)
		return
	}
	sum := core.SessionSummary{Files: len(diffs)}
	for _, d := range diffs {
		sum.Additions += d.Additions
		sum.Deletions += d.Deletions
	}
	err = e.st.Tx(ctx, func(tx store.Tx) error {
		sess, err := tx.Session(ctx, sessionID)
		if err != nil {
			return err
		}
		sess.Summary = &sum
		w := writer{ctx: ctx, tx: tx}
		w.session(sess)
		w.event(sessionID, core.EventSessionDiff, map[string]any{"sessionID": sessionID, "diff": diffs})
		return w.err
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		e.log.Warn("session summary", "session", sessionID, "err", err)
	}
}
