package engine

import (
	"context"
	"errors"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/snapshot"
	"github.com/agentd/agentd/internal/tool"
)

// Snapshots of the workspace, step by step, as opencode records them, but
// only where something may have changed: before the first call of a run
// to a tool that may change files (bash, edit, write, a subagent, an MCP
// tool; not read, grep, list …), and after each step that made such
// calls. That step ends with the new snapshot (on its step-finish part)
// and a patch part naming the files it changed, with the snapshot from
// before the change, which a revert restores them from. Steps that only
// talk or read take none: a snapshot costs git processes (three, tens of
// milliseconds), which every turn of a text-only session would pay. A
// step-start part carries the last snapshot taken, if any.

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

// beforeChange is called before a tool that may change files runs: the
// step is marked as changing, and the workspace is snapshotted unless this
// execution of the run already holds a snapshot (the last step's end). The
// run's first snapshot is its start, for diffs.
func (r *runner) beforeChange(ctx context.Context, t tool.Tool) {
	if r.step == nil || !tool.Mutates(t) {
		return
	}
	r.step.changes = true
	if r.snap == "" {
		r.snap = r.track(ctx, r.step.msg.CWD)
	}
	if r.run.Snapshot == "" {
		r.run.Snapshot = r.snap
	}
}

// finishStep closes a step whose tool calls ran: for a step that may have
// changed files, a new snapshot and the patch part of what changed; then
// the step-finish part held back by endStep. The writes ride with the
// runner's next transaction.
func (r *runner) finishStep(ctx context.Context) {
	s := r.step
	if s == nil {
		return
	}
	before := r.snap
	after := ""
	if before != "" && s.changes {
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
