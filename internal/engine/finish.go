package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/agentd/agentd/internal/agent"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// errSteered means a message joined the run just as it was about to end;
// the run goes on to answer it.
var errSteered = errors.New("run received a new message")

// finish writes the run's end in one transaction, after the writes still
// pending: the run row, the last assistant message, the idle part, and the
// status and idle events. A run that has already ended is left alone, so a
// run ends exactly once.
func (r *runner) finish(ctx context.Context, o outcome) error {
	e, s := r.e, r.step
	var ends ends
	err := r.tx(ctx, func(tx store.Tx) error {
		ends = ends[:0]
		run, err := lockedRun(ctx, tx, r.run.ID)
		if err != nil {
			return err
		}
		if core.TerminalState(run.State) {
			return nil
		}
		// The snapshots this execution took last may not be stored yet.
		if r.run.Snapshot != "" && run.Snapshot == "" {
			run.Snapshot = r.run.Snapshot
		}
		if r.run.SnapshotEnd != "" {
			run.SnapshotEnd = r.run.SnapshotEnd
		}
		if o.state == core.RunSucceeded && s != nil {
			more, err := unansweredTx(ctx, tx, run, s.msg.ID)
			if err != nil {
				return err
			}
			if more {
				return errSteered
			}
		}
		return e.finishTx(ctx, tx, run, o, s, &ends)
	})
	if err == nil {
		e.ended(ends)
	}
	return err
}

// lockedRun locks the run's session (see store.Tx.LockSession) and reads
// the run under that lock: a decision to end it cannot then miss a prompt
// steered into it, nor race the start of a queued run.
func lockedRun(ctx context.Context, tx store.Tx, runID string) (core.Run, error) {
	run, err := tx.Run(ctx, runID)
	if err != nil {
		return run, err
	}
	if err := tx.LockSession(ctx, run.SessionID); err != nil {
		return run, err
	}
	return tx.Run(ctx, runID)
}

// finishQueued ends a run that no executor has picked up. done is false when
// the run is executing somewhere and must be stopped through its handle.
func (e *Engine) finishQueued(ctx context.Context, runID, reason string) (done bool, err error) {
	var ends ends
	err = e.st.Tx(ctx, func(tx store.Tx) error {
		ends = ends[:0]
		run, err := lockedRun(ctx, tx, runID)
		if err != nil {
			return err
		}
		if core.TerminalState(run.State) {
			done = true
			return nil
		}
		if run.State != core.RunQueued {
			return nil
		}
		done = true
		return e.finishTx(ctx, tx, run, outcome{state: core.RunInterrupted, reason: reason,
			err: core.AbortedError("The operation was aborted.")}, nil, &ends)
	})
	if err == nil && done {
		e.ended(ends)
		e.runEnded(runID)
	}
	return done, err
}

// unansweredTx reports whether a user message joined the run after the
// step whose assistant message is stepMsgID began. "After" is the
// server's order of arrival, never the order of ids (a client chooses its
// message ids).
func unansweredTx(ctx context.Context, r store.Reader, run core.Run, stepMsgID string) (bool, error) {
	// Usually nothing came after the step's message: the query answers
	// from the index without decoding a message.
	msgs, err := r.Messages(ctx, run.SessionID, store.MessageQuery{After: stepMsgID})
	if err != nil {
		return false, err
	}
	for _, m := range msgs {
		if m.Info.RunID == run.ID && m.Info.Role == core.RoleUser && !isCompactionRequest(m.Info) {
			return true, nil
		}
	}
	return false, nil
}

// finishTx writes a run's end in tx and adds it to ends, which the caller
// counts and logs once tx has committed.
func (e *Engine) finishTx(ctx context.Context, tx store.Tx, run core.Run, o outcome, s *step, ends *ends) error {
	now := e.now()
	w := writer{ctx: ctx, tx: tx}
	msgs, err := tx.RunMessages(ctx, run.ID)
	if err != nil {
		return err
	}
	msg, err := e.endMessage(ctx, tx, &w, run, o, s, msgs, now)
	if err != nil {
		return err
	}
	w.message(*msg)
	w.part(core.Part{ID: core.NewID(core.PrefixPart, false), SessionID: run.SessionID, MessageID: msg.ID, Type: core.PartIdle,
		RunID: run.ID, Outcome: o.state, Reason: o.reason, Error: o.err, Time: core.PartTime{Start: now}})
	if err := closeQuestions(ctx, &w, tx, run, now); err != nil {
		return err
	}
	if err := closePermissions(ctx, &w, tx, run, o.state, now); err != nil {
		return err
	}
	run.State, run.Reason, run.Error, run.Time.Ended = o.state, o.reason, o.err, now
	run.Phase, run.Attempt, run.RetryMessage, run.NextRetry = "", 0, "", 0
	w.run(run)
	if w.err != nil {
		return w.err
	}
	ends.add(run, msgs, msg)
	rest, err := tx.ActiveRuns(ctx, run.SessionID)
	if err != nil {
		return err
	}
	if o.err != nil {
		// opencode's clients show a run's failure (and abort) from
		// session.error.
		w.event(run.SessionID, core.EventSessionError, core.ErrorEventProps{SessionID: run.SessionID, Error: o.err})
	}
	if len(rest) == 0 {
		w.status(run.SessionID, core.StatusOf(nil, &run))
		w.event(run.SessionID, core.EventSessionIdle, core.IdleEventProps{SessionID: run.SessionID})
	} else {
		// The next queued run takes over: the session stays busy, with a
		// new run id.
		w.status(run.SessionID, core.StatusOf(&rest[0], nil))
	}
	return w.err
}

// endMessage is the assistant message the run's end is written on,
// completed and carrying the run's error: the step in progress's (whose
// open parts and calls are closed), else the run's last, else a new one
// for a run that never started a step (aborted while queued).
func (e *Engine) endMessage(ctx context.Context, tx store.Tx, w *writer, run core.Run, o outcome, s *step, msgs []core.Message, now int64) (*core.Message, error) {
	var msg *core.Message
	if s != nil {
		s.closeOnEnd(w, now, o.reason)
		m := s.msg
		msg = &m
	} else {
		for i := len(msgs) - 1; i >= 0; i-- {
			if msgs[i].Role == core.RoleAssistant {
				m := msgs[i]
				msg = &m
				break
			}
		}
	}
	if msg == nil {
		sess, err := tx.Session(ctx, run.SessionID)
		if err != nil {
			return nil, err
		}
		m := assistantMessage(run, sess, run.UserMessageID, now)
		msg = &m
	}
	if o.err != nil && msg.Error == nil {
		msg.Error = o.err
	}
	if msg.Completed == 0 {
		msg.Completed = now
	}
	return msg, nil
}

// closeOnEnd writes the step's open parts ended and its unfinished calls
// failed: the run ended around them.
func (s *step) closeOnEnd(w *writer, now int64, reason string) {
	for _, p := range s.open() {
		if p.Time.End == 0 {
			p.Time.End = now
		}
		w.part(*p)
	}
	for _, p := range s.calls {
		if p.State.Status == core.ToolPending || p.State.Status == core.ToolRunning {
			start := p.State.Time.Start
			if start == 0 {
				start = now
			}
			p.State = core.ToolState{Status: core.ToolError, Input: p.State.Input, Error: "tool call ended: run " + reason,
				Metadata: map[string]any{"interrupted": true}, Time: core.PartTime{Start: start, End: now}}
			w.part(*p)
		}
	}
}

// backoff returns the delay before retry attempt+1: the provider's
// Retry-After when given, else exponential from Base with ±20 % jitter,
// capped at Cap.
func backoff(p RetryPolicy, attempt int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return min(retryAfter, p.MaxElapsed)
	}
	d := p.Base
	for i := 1; i < attempt && d < p.Cap; i++ {
		d *= 2
	}
	d = min(d, p.Cap)
	jitter := time.Duration((rand.Float64()*0.4 - 0.2) * float64(d))
	return d + jitter
}

// recover repairs runs left non-terminal by a previous process and returns
// the sessions whose runs must be resumed.
func (e *Engine) recover(ctx context.Context) ([]string, error) {
	runs, err := e.st.ActiveRuns(ctx, "")
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var sessions []string
	var cut []core.Run
	for _, run := range runs {
		if !seen[run.SessionID] {
			seen[run.SessionID] = true
			sessions = append(sessions, run.SessionID)
		}
		if run.State != core.RunQueued {
			cut = append(cut, run)
		}
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
				action, err := e.repair(ctx, tx, run, true, &ends)
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
		for _, a := range actions {
			e.cfg.Metrics.Recovered(a)
		}
		e.ended(ends)
	}
	for range len(runs) - len(cut) {
		e.cfg.Metrics.Recovered("queued")
	}
	return sessions, nil
}

// repair closes what a crash left open in one run's transcript and decides
// whether the run resumes. crashed counts the resume against the
// crash-loop budget; a run released by a clean shutdown is not counted.
// action says what became of the run: resumed, waiting_permission,
// interrupted (resuming is off) or failed (crash loop).
func (e *Engine) repair(ctx context.Context, tx store.Tx, run core.Run, crashed bool, ends *ends) (action string, err error) {
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
			err: core.AbortedError("run interrupted by server restart")}, nil, ends)
	case crashed && run.Resumes >= e.cfg.MaxResumes:
		return "failed", e.finishTx(ctx, tx, run, outcome{state: core.RunFailed, reason: core.ReasonCrashLoop,
			err: core.UnknownError(core.RefCrashLoop, "run was resumed too often without completing a step")}, nil, ends)
	}
	if waiting != "" {
		run.State, run.Phase = core.RunRunning, waiting
		w.run(run)
		w.status(run.SessionID, core.StatusOf(&run, nil))
		return waiting, w.err
	}
	run.State, run.Phase, run.Attempt, run.RetryMessage, run.NextRetry = core.RunRunning, core.PhaseRecovering, 0, "", 0
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
func (e *Engine) closeCutOff(ctx context.Context, tx store.Tx, run core.Run, toolErr, msgErr string) (waiting string, err error) {
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
func askedCalls(ctx context.Context, tx store.Tx, runID string) (waits map[string]bool, unanswered map[string]string, err error) {
	waits, unanswered = map[string]bool{}, map[string]string{}
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

// assistantMessage starts an assistant message of the run, answering the
// user message parentID.
func assistantMessage(run core.Run, sess core.Session, parentID string, now int64) core.Message {
	return core.Message{ID: core.NewID(core.PrefixMessage, false), SessionID: run.SessionID, Role: core.RoleAssistant,
		Created: now, ParentID: parentID, ProviderID: run.Model.ProviderID, ModelID: run.Model.ModelID,
		Mode: agentName(run.Agent), Agent: agentName(run.Agent), CWD: sess.Directory, Root: sess.Directory, RunID: run.ID}
}

func agentName(a string) string {
	if a == "" {
		return agent.Default
	}
	return a
}

// ends collects the runs a transaction ended, with their accounting, so
// that they are counted and logged once it has committed (a transaction
// that rolls back ended nothing).
type ends []endedRun

type endedRun struct {
	run    core.Run
	tokens core.Tokens
	cost   float64
}

func (es *ends) add(run core.Run, msgs []core.Message, last *core.Message) {
	var e endedRun
	e.run = run
	for _, m := range msgs {
		if m.Role != core.RoleAssistant || (last != nil && m.ID == last.ID) {
			continue
		}
		e.tokens, e.cost = e.tokens.Add(m.Tokens), e.cost+m.Cost
	}
	if last != nil {
		e.tokens, e.cost = e.tokens.Add(last.Tokens), e.cost+last.Cost
	}
	*es = append(*es, e)
}

// ended counts and logs runs whose end has committed (one line per run,
// with what an operator looks for first) and wakes their waiters.
func (e *Engine) ended(es ends) {
	for _, x := range es {
		r := x.run
		d := time.Duration(r.Time.Ended-r.Time.Created) * time.Millisecond
		e.cfg.Metrics.RunEnded(r.State, r.Reason, d, r.Steps)
		args := []any{"run", r.ID, "session", r.SessionID, "outcome", r.State, "reason", r.Reason,
			"duration", d, "steps", r.Steps, "model", r.Model.ProviderID + "/" + r.Model.ModelID,
			"tokens_input", x.tokens.Input, "tokens_output", x.tokens.Output, "cost", x.cost}
		if r.Error != nil {
			args = append(args, "error", r.Error.Data.Message)
		}
		e.log.Info("run ended", args...)
		e.runEnded(r.ID)
	}
}
