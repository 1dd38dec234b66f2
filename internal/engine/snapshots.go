package engine

import (
	"context"
	"errors"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/snapshot"
)

// Snapshots of the workspace, step by step, as opencode records them: a
// step starts from the workspace's snapshot (on its step-start part), and
// a step whose tools ran ends with a new one (on its step-finish part) and
// a patch part naming the files the step changed, with the snapshot from
// before the change, which a revert restores them from. A step without
// tool calls changed nothing of the agent's and takes no new snapshot.

// snapshotTimeout bounds one snapshot; a workspace that takes longer is
// left unrecorded for that step.
const snapshotTimeout = 30 * time.Second

// track takes a snapshot of the session's workspace; "" when snapshots are
// off or failed (the run goes on without; the failure is logged once per
// kind).
func (r *runner) track(ctx context.Context, dir string) string {
	s := r.e.cfg.Snapshots
	if !s.Enabled() || dir == "" {
		return ""
	}
	// Shutdown or abort must not cost the record of what tools did.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), snapshotTimeout)
	defer cancel()
	h, err := s.Track(ctx, dir)
	if err != nil {
		r.e.snapshotFailed(dir, err)
		return ""
	}
	return h
}

// snapshotFailed logs a workspace's snapshot failure once per workspace
// and kind of failure.
func (e *Engine) snapshotFailed(dir string, err error) {
	kind := "error"
	if errors.Is(err, snapshot.ErrTooLarge) {
		kind = "too large"
	}
	key := dir + "\x00" + kind
	if _, seen := e.snapshotWarned.LoadOrStore(key, true); !seen {
		e.log.Warn("workspace snapshot failed; steps go unrecorded (no diff or revert for them)", "directory", dir, "err", err)
	}
}

// startSnapshot is the snapshot a step starts from: the last one this
// execution of the run took, else a new one. It is also the run's first
// when the run has none.
func (r *runner) startSnapshot(ctx context.Context, dir string) string {
	if r.snap == "" {
		r.snap = r.track(ctx, dir)
	}
	if r.run.Snapshot == "" {
		r.run.Snapshot = r.snap
	}
	return r.snap
}

// finishStep closes a step whose tool calls ran: a new snapshot, the patch
// part of what the calls changed, then the step-finish part held back by
// endStep. The writes ride with the runner's next transaction.
func (r *runner) finishStep(ctx context.Context) {
	s := r.step
	if s == nil {
		return
	}
	before := r.snap
	after := ""
	if before != "" {
		after = r.track(ctx, s.msg.CWD)
	}
	var patch *core.Part
	if after != "" && after != before {
		files, err := r.e.cfg.Snapshots.Changed(context.WithoutCancel(ctx), s.msg.CWD, before, after)
		if err != nil {
			r.e.snapshotFailed(s.msg.CWD, err)
		} else if len(files) > 0 {
			patch = &core.Part{ID: core.NewID(core.PrefixPart, false), SessionID: s.msg.SessionID, MessageID: s.msg.ID,
				Type: core.PartPatch, Hash: before, Files: files}
		}
		r.snap = after
		r.run.SnapshotEnd = after
	}
	finish := s.finishPart
	s.finishPart = nil
	if finish != nil {
		finish.Snapshot = r.snap
	}
	if patch == nil && finish == nil {
		return
	}
	r.later(func(w *writer) {
		if patch != nil {
			w.part(*patch)
		}
		if finish != nil {
			w.part(*finish)
		}
	})
}
