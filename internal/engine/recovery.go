package engine

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/pause"
	"github.com/agentd/agentd/internal/store"
)

// recover repairs runs left non-terminal by a previous process and returns
// the sessions whose runs must be resumed.
func (e *Engine) recover(ctx context.Context) ([]string, error) {
	runs, err := e.st.ActiveRuns(ctx, "")
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var sessions []string
	var cut, queued []core.Run
	byAction := map[string][]string{} // what became of each run, for the log
	for _, run := range runs {
		first := !seen[run.SessionID]
		if first {
			seen[run.SessionID] = true
			sessions = append(sessions, run.SessionID)
		}
		if run.State != core.RunQueued {
			cut = append(cut, run)
		} else if first {
			queued = append(queued, run)
		}
	}
	if err := e.cfg.Pause.HoldQueued(ctx, e.st, queued); err != nil {
		return nil, err
	}
	// Repairs are batched so that a restart with many runs in flight pays
	// for few commits; each run's repair is still all-or-nothing with its
	// batch.
	const batch = 100
	for i := 0; i < len(cut); i += batch {
		chunk := cut[i:min(i+batch, len(cut))]
		var ends ends
		var actions []string
		err := e.st.Tx(ctx, func(tx store.Tx) error {
			ends, actions = ends[:0], actions[:0]
			for _, run := range chunk {
				action, err := e.repair(ctx, tx, run, true, true, &ends)
				if err != nil {
					return fmt.Errorf("repair run %s: %w", run.ID, err)
				}
				actions = append(actions, action)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		for i, a := range actions {
			e.cfg.Metrics.Recovered(a)
			byAction[a] = append(byAction[a], chunk[i].ID)
		}
		e.ended(ends)
	}
	for _, run := range runs {
		if run.State == core.RunQueued {
			e.cfg.Metrics.Recovered("queued")
			byAction["queued"] = append(byAction["queued"], run.ID)
		}
	}
	e.logRecovered(byAction)
	return sessions, nil
}

// Resume continues the session's run held paused (package pause).
func (e *Engine) Resume(ctx context.Context, sessionID string) error {
	if err := pause.Resume(ctx, e.st, sessionID); err != nil {
		return err
	}
	e.kick(sessionID)
	return nil
}

// logRecovered says in one line what start-up did with the runs the
// previous process left: how many of each fate, and their ids (the first
// twenty of each).
func (e *Engine) logRecovered(byAction map[string][]string) {
	if len(byAction) == 0 {
		return
	}
	actions := make([]string, 0, len(byAction))
	for a := range byAction {
		actions = append(actions, a)
	}
	sort.Strings(actions)
	var attrs []any
	for _, a := range actions {
		ids := byAction[a]
		shown := strings.Join(ids[:min(len(ids), 20)], ",")
		if len(ids) > 20 {
			shown += ",…"
		}
		attrs = append(attrs, a, len(ids), a+"_runs", shown)
	}
	e.log.Info("runs left by the previous process", attrs...)
}

// repair closes what a crash left open in one run's transcript and decides
// whether the run resumes. crashed counts the resume against the
// crash-loop budget; a run released by a clean shutdown is not counted.
// action says what became of the run: resumed, waiting_permission,
// paused (package pause), interrupted (resuming is off) or failed (crash loop).
// hold applies the pause policy: the run was cut off by a restart or its
// node's stop, not taken over from a live node whose lease lapsed.
func (e *Engine) repair(ctx context.Context, tx store.Tx, run core.Run, crashed, hold bool, ends *ends) (action string, err error) {
	toolErr, msgErr := "interrupted by server restart; outcome unknown", "cut off by a server restart"
	if e.cfg.Leaser != nil {
		toolErr, msgErr = "interrupted: the node running it stopped; outcome unknown", "cut off: the node running it stopped"
	}
	waiting, err := e.closeCutOff(ctx, tx, run, toolErr, msgErr)
	if err != nil {
		return "", err
	}
	w := writer{ctx: ctx, tx: tx}
	switch {
	case !e.cfg.Resume:
		return "interrupted", e.finishTx(ctx, tx, run, outcome{state: core.RunInterrupted, reason: core.ReasonServerRestart,
			err: core.AbortedError("run interrupted by server restart")}, nil, nil, ends)
	case crashed && run.Resumes >= e.cfg.MaxResumes:
		return "failed", e.finishTx(ctx, tx, run, outcome{state: core.RunFailed, reason: core.ReasonCrashLoop,
			err: core.UnknownError(core.RefCrashLoop, "run was resumed too often without completing a step")}, nil, nil, ends)
	}
	if err := run.Apply(core.OnResume); err != nil {
		return "", err
	}
	if hold {
		if held, err := e.cfg.Pause.Hold(ctx, tx, &run); err != nil {
			return "", err
		} else if held {
			waiting = core.PhasePaused
		}
	}
	if waiting != "" {
		run.Phase = waiting
		w.run(run)
		w.status(run.SessionID, core.StatusOf(&run, nil))
		return string(waiting), w.err
	}
	run.Phase, run.Attempt, run.RetryMessage, run.NextRetry = core.PhaseRecovering, 0, "", 0
	if crashed {
		run.Resumes++
	}
	w.run(run)
	w.status(run.SessionID, core.StatusOf(&run, nil))
	return "resumed", w.err
}

// repairStalled closes what a run the storage stopped left open, before
// the run is taken up again. Unlike a restart this is not counted as a
// resume: the process did not crash, and a disk that stays full for a
// while must not fail the run.
func (e *Engine) repairStalled(run core.Run, lease *store.Lease) error {
	ctx, cancel := detached(e.baseCtx)
	defer cancel()
	if lease != nil {
		ctx = store.WithLease(ctx, lease)
	}
	return e.st.Tx(ctx, func(tx store.Tx) error {
		cur, err := tx.Run(ctx, run.ID)
		if err != nil || core.TerminalState(cur.State) {
			return err
		}
		_, err = e.closeCutOff(ctx, tx, cur, "interrupted: the storage refused a write; outcome unknown",
			"cut off: the storage refused a write")
		return err
	})
}

// closeCutOff ends the parts and messages of a run that were open when it
// was cut off: a tool call that may have run gets an error result (its
// outcome is unknown, so it is not run again), streamed text is closed, an
// unfinished message ends with an abort error. Calls waiting for a
// permission or an answer keep waiting (waiting is the phase that says so,
// "" when none waits), and so do task calls waiting for their child
// session's run.
func (e *Engine) closeCutOff(ctx context.Context, tx store.Tx, run core.Run, toolErr, msgErr string) (waiting core.Phase, err error) {
	now := e.now()
	w := writer{ctx: ctx, tx: tx}
	infos, err := tx.RunMessages(ctx, run.ID)
	if err != nil {
		return "", err
	}
	waits, unanswered, err := askedCalls(ctx, tx, run.ID)
	if err != nil {
		return "", err
	}
	kept := false
	for _, info := range infos {
		if info.Role != core.RoleAssistant {
			continue
		}
		m, err := tx.Message(ctx, run.SessionID, info.ID)
		if err != nil {
			return "", err
		}
		for _, p := range m.Parts {
			_, waitsForChild := childOf(p)
			switch {
			case waits[p.ID] && notStarted(p):
				kept = true
				if waiting == "" {
					waiting = unanswered[p.ID]
				}
			case waitsForChild && p.State.Status == core.ToolRunning:
				// A task call waiting for its child: the child is a run of
				// its own, recovered on its own; the call waits for it again.
				kept = true
			default:
				closeCutPart(&w, p, toolErr, now)
			}
		}
		if m.Info.Completed == 0 && !kept {
			info := m.Info
			info.Completed = now
			info.Finish = "error"
			info.Error = core.AbortedError(msgErr)
			w.message(info)
		}
	}
	return waiting, w.err
}

// askedCalls are the run's calls that asked the user (waits: a permission
// or a question) and, of those still unanswered, the phase they wait in.
// Such a call has not run; it keeps waiting, or, answered before it
// started, runs as the answer said.
func askedCalls(ctx context.Context, tx store.Tx, runID string) (waits map[string]bool, unanswered map[string]core.Phase, err error) {
	waits, unanswered = map[string]bool{}, map[string]core.Phase{}
	asked, err := tx.RunPermissions(ctx, runID)
	if err != nil {
		return nil, nil, err
	}
	for _, q := range asked {
		waits[q.PartID] = true
		if q.Reply == "" {
			unanswered[q.PartID] = core.PhaseWaitingPermission
		}
	}
	questions, err := tx.RunQuestions(ctx, runID)
	if err != nil {
		return nil, nil, err
	}
	for _, q := range questions {
		waits[q.PartID] = true
		if q.Pending() {
			unanswered[q.PartID] = core.PhaseWaitingQuestion
		}
	}
	return waits, unanswered, nil
}

// closeCutPart ends what a crash cut off in a part: a call that was
// running is an error whose outcome is unknown (never run again), streamed
// text ends where it stopped.
func closeCutPart(w *writer, p core.Part, toolErr string, now int64) {
	switch {
	case p.Type == core.PartTool && (p.State.Status == core.ToolPending || p.State.Status == core.ToolRunning):
		start := p.State.Time.Start
		if start == 0 {
			start = now
		}
		p.State = core.ToolState{Status: core.ToolError, Input: p.State.Input, Error: toolErr,
			Metadata: map[string]any{"interrupted": true}, Time: core.PartTime{Start: start, End: now}}
		w.part(p)
	case (p.Type == core.PartText || p.Type == core.PartReasoning) && p.Time.End == 0:
		p.Time.End = now
		w.part(p)
	}
}

// logStopped says what Stop did with the runs that were executing: left
// non-terminal for the next start to resume (or, with leases, released to
// the other nodes), and how long stopping them took.
func (e *Engine) logStopped(running []string, since time.Time) {
	took := time.Since(since).Round(time.Millisecond)
	if len(running) == 0 {
		e.log.Info("engine stopped: no run was executing", "took", took)
		return
	}
	sort.Strings(running)
	next := "the next start resumes them"
	if e.cfg.Leaser != nil {
		next = "their leases are released: another node takes them up"
	}
	e.log.Info("engine stopped: runs handed off", "count", len(running), "runs", strings.Join(running, ","), "next", next, "took", took)
}
