package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/agent"
	"github.com/agentd/agentd/internal/asks"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/modelview"
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
	known := r.runMessages(ctx)
	err := r.tx(ctx, func(tx store.Tx) error {
		ends = ends[:0]
		run, err := lockedRunOf(ctx, tx, r.run.SessionID, r.run.ID)
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
		return e.finishTx(ctx, tx, run, o, s, known, &ends)
	})
	if err == nil {
		e.ended(ends)
	}
	return err
}

// sameRunMessages is CheckHistory's comparison of the run's messages as
// it kept them with the store's: the same messages (but the one its end
// writes, which may be pending in the end's transaction) and the same
// usage.
func sameRunMessages(runID string, known, stored []core.Message, end *core.Message) error {
	ids := func(msgs []core.Message) string {
		var b strings.Builder
		for _, m := range msgs {
			if m.ID != end.ID {
				b.WriteString(m.ID + " ")
			}
		}
		return b.String()
	}
	kc, kt := runUsage(known, end)
	sc, st := runUsage(stored, end)
	if ids(known) != ids(stored) || kc != sc || kt != st {
		return fmt.Errorf("run %s: the list of its messages as it kept them (%s; %v, %+v) differs from the store's (%s; %v, %+v)",
			runID, ids(known), kc, kt, ids(stored), sc, st)
	}
	return nil
}

// runMessages are the infos of the run's messages as the run kept them
// (own.go), for its end to add up its usage outside the writer's serial
// section; nil when the run must read them in the end's transaction. The
// end's transaction may carry the last step's writes still pending: of
// those, finishTx counts the step's message as it ends it, and nothing
// else changes usage.
func (r *runner) runMessages(ctx context.Context) []core.Message {
	if ok, err := r.settleOwn(ctx); !ok || err != nil {
		return nil
	}
	var out []core.Message
	for _, m := range r.own {
		if m.Info.RunID == r.run.ID {
			out = append(out, m.Info)
		}
	}
	return out
}

// lockedRun locks the run's session (see store.Tx.LockSession) and reads
// the run under that lock: a decision to end it cannot then miss a prompt
// steered into it, nor race the start of a queued run.
func lockedRun(ctx context.Context, tx store.Tx, runID string) (core.Run, error) {
	run, err := tx.Run(ctx, runID)
	if err != nil {
		return run, err
	}
	return lockedRunOf(ctx, tx, run.SessionID, runID)
}

// lockedRunOf is lockedRun for a runner, which knows its run's session (a
// run never changes session): one read of the run, inside the writer's
// serial section, instead of two.
func lockedRunOf(ctx context.Context, tx store.Tx, sessionID, runID string) (core.Run, error) {
	if err := tx.LockSession(ctx, sessionID); err != nil {
		return core.Run{}, err
	}
	return tx.Run(ctx, runID)
}

// finishQueued ends a run that no executor has picked up. done is false when
// the run is executing somewhere and must be stopped through its handle.
func (e *Engine) finishQueued(ctx context.Context, runID string, reason core.EndReason) (done bool, err error) {
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
		if run.State != core.RunQueued && run.Phase != core.PhasePaused {
			return nil
		}
		done = true
		return e.finishTx(ctx, tx, run, outcome{state: core.RunInterrupted, reason: reason,
			err: core.AbortedError("The operation was aborted.")}, nil, nil, &ends)
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
		if m.Info.RunID == run.ID && m.Info.Role == core.RoleUser && !modelview.IsCompactionRequest(m.Info) {
			return true, nil
		}
	}
	return false, nil
}

// finishTx writes a run's end in tx and adds it to ends, which the caller
// counts and logs once tx has committed. known are the run's messages
// when its runner kept them (nil: read them in tx).
func (e *Engine) finishTx(ctx context.Context, tx store.Tx, run core.Run, o outcome, s *step, known []core.Message, ends *ends) error {
	now := e.now()
	w := writer{ctx: ctx, tx: tx}
	msgs, stored := known, []core.Message(nil)
	if known == nil || e.cfg.CheckHistory {
		var err error
		if stored, err = tx.RunMessages(ctx, run.ID); err != nil {
			return err
		}
		if known == nil {
			msgs = stored
		}
	}
	msg, err := e.endMessage(ctx, tx, &w, run, o, s, msgs, now)
	if err != nil {
		return err
	}
	if known != nil && stored != nil {
		if err := sameRunMessages(run.ID, known, stored, msg); err != nil {
			return err
		}
	}
	w.message(*msg)
	w.part(core.Part{ID: core.NewID(core.PrefixPart, false), SessionID: run.SessionID, MessageID: msg.ID, Type: core.PartIdle,
		RunID: run.ID, Outcome: o.state, Reason: string(o.reason), Error: o.err, Time: core.PartTime{Start: now}})
	by := asks.EndedBy(run, o.reason)
	if err := closeQuestions(ctx, &w, tx, run, by, now); err != nil {
		return err
	}
	if err := closePermissions(ctx, &w, tx, run, o.state, by, now); err != nil {
		return err
	}
	if err := run.Apply(core.EndEvent(o.state)); err != nil {
		return err
	}
	run.Reason, run.Error, run.Time.Ended = o.reason, o.err, now
	run.Phase, run.Attempt, run.RetryMessage, run.NextRetry = "", 0, "", 0
	w.run(run)
	// The session's totals move once, when the run ends, by what its
	// messages record (each step's usage is on its message as it ends):
	// a read and a rewrite of the session per run rather than per step,
	// and exact across restarts, since a run ends exactly once.
	if cost, tokens := runUsage(msgs, msg); cost > 0 || tokens != (core.Tokens{}) {
		addUsage(&w, run.SessionID, cost, tokens)
	}
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
func (s *step) closeOnEnd(w *writer, now int64, reason core.EndReason) {
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
			p.State = core.ToolState{Status: core.ToolError, Input: p.State.Input, Error: "tool call ended: run " + string(reason),
				Metadata: map[string]any{"interrupted": true}, Time: core.PartTime{Start: start, End: now}}
			w.part(*p)
		}
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

// addUsage moves the session's totals by a run's usage.
func addUsage(w *writer, sessionID string, cost float64, tokens core.Tokens) {
	sess, err := w.tx.Session(w.ctx, sessionID)
	if err != nil {
		if w.err == nil {
			w.err = err
		}
		return
	}
	sess.Cost += cost
	sess.Tokens = sess.Tokens.Add(tokens)
	sess.Budget.Note(sess.Tokens, sess.Cost)
	w.session(sess)
	if err := w.tx.ChargeKey(w.ctx, sessionID, core.Spend{Tokens: tokens.Total(), Cost: cost}); err != nil && w.err == nil {
		w.err = err
	}
}

// runUsage totals the usage of a run's assistant messages, last (the
// message the end is written on) standing for its stored copy.
func runUsage(msgs []core.Message, last *core.Message) (float64, core.Tokens) {
	var cost float64
	var tokens core.Tokens
	seen := false
	for _, m := range msgs {
		if m.Role != core.RoleAssistant {
			continue
		}
		if m.ID == last.ID {
			m, seen = *last, true
		}
		cost += m.Cost
		tokens = tokens.Add(m.Tokens)
	}
	if !seen {
		cost += last.Cost
		tokens = tokens.Add(last.Tokens)
	}
	return cost, tokens
}
