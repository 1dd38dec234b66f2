package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentd/agentd/internal/agent"
	"github.com/agentd/agentd/internal/budget"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/plugin"
	"github.com/agentd/agentd/internal/store"
	"go.opentelemetry.io/otel/trace"
)

// outcome is how a run ends.
type outcome struct {
	state  core.RunState
	reason core.EndReason
	err    *core.Error
}

var succeeded = outcome{state: core.RunSucceeded}

// detached returns a context for writes that must happen even when the
// run's own context is cancelled (terminal state, last flushes).
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
}

// execute runs one run to its end, or until shutdown. It returns an error
// wrapping store.ErrStorage when the storage refused one of the run's
// writes: the run then stays non-terminal, whatever outcome the loop
// reached (a failure it caused is not the run's), to be taken up again.
func (e *Engine) execute(run core.Run, lease *store.Lease) error {
	ctx, h := e.register(run.ID)
	defer e.unregister(h)
	if lease != nil {
		// Every write of the run is fenced by its lease. The caller drops
		// the lease: it keeps it over a storage stall.
		ctx = store.WithLease(ctx, lease)
	}
	lost := &store.WriteFailures{}
	ctx = store.WithWriteFailures(ctx, lost)
	ctx, span := e.runSpan(ctx, run)
	defer span.End()
	r := &runner{e: e, run: run, lost: lost}
	r.pending.ctx, r.pending.runID = ctx, run.ID
	defer r.closeLater()
	defer r.endStepSpan()
	for {
		o, ok := r.loop(ctx)
		if !ok {
			// Shutdown: leave the run non-terminal for the next start or
			// another node. A fenced run writes nothing more at all.
			if !errors.Is(context.Cause(ctx), errFenced) {
				r.flushOnShutdown(ctx)
			}
			return nil
		}
		if err := lost.Err(); err != nil {
			return fmt.Errorf("run %s: %w", run.ID, err)
		}
		wctx, cancel := detached(ctx)
		err := r.finish(wctx, o)
		cancel()
		if errors.Is(err, errSteered) {
			continue
		}
		if errors.Is(err, store.ErrFenced) {
			return nil
		}
		if errors.Is(err, store.ErrStorage) {
			return fmt.Errorf("write outcome of run %s: %w", run.ID, err)
		}
		if err != nil {
			// The run stays non-terminal; the next start recovers it.
			e.log.Error("write run outcome", "run", run.ID, "err", err)
			return nil
		}
		endRunSpan(span, o, r.run.Steps)
		if o.state == core.RunSucceeded {
			r.keepHistory(ctx)
		}
		sctx, cancel := detached(ctx)
		e.summarize(sctx, r.run)
		cancel()
		e.runEnded(run.ID)
		return nil
	}
}

// runner holds one executing run and its current step.
type runner struct {
	e    *Engine
	run  core.Run
	step *step
	// lost records the writes of this run the storage refused.
	lost *store.WriteFailures
	// prefix is the conversation before this run, converted once (nil:
	// not read yet; empty when the run is the session's first).
	prefix []llm.Message
	// own is the run's part of the transcript as the last step saw it
	// (see own.go); nil when it must be read whole again. wrote holds the
	// run's writes committed since, for the next step to apply.
	own   []core.MessageWithParts
	wrote ownWrites
	// recent holds the tool calls of this run, for the doom-loop guard.
	recent []string

	// What setup prepared for every step.
	agent    agent.Agent
	provider llm.Provider
	model    llm.Model
	system   []string
	tools    []llm.ToolSpec
	options  map[string]any
	dir      string // the session's directory
	maxSteps int

	// lastInput is the input size of the last step, as the provider
	// counted it; overflowRetried is set once a refused step was retried
	// after a compaction.
	lastInput       int64
	overflowRetried bool
	// justCompacted is set by a compaction and cleared by the next step,
	// so that a conversation that still does not fit is sent anyway (the
	// provider has the last word) instead of compacted forever.
	justCompacted bool
	// compacting is set while a summary is written; a refusal then is not
	// answered by another compaction.
	compacting bool
	// stepSpan is the trace span of the current step.
	stepSpan trace.Span
	// pending holds writes waiting for the runner's next transaction.
	pending later
	// snap is the workspace's snapshot as this execution of the run last
	// took it ("" before the first, or without snapshots).
	snap string
	// structured is set when the run's prompt asks for structured output.
	structured *structured
}

// smallPart is the size below which streamed text is written at every
// interval.
const smallPart = 1 << 10

// loop executes steps until the run ends. ok is false when the engine is
// shutting down and the run must be left as it is. A run goes through
// prepare (its claim, model and tools), then what a crash or a request
// left to do (resume, compactOnRequest), then steps until the model is
// done (nextStep). Each of those returns done once the run's outcome (or
// its interruption) is known.
func (r *runner) loop(ctx context.Context) (o outcome, ok bool) {
	if o, ok, done := r.prepare(ctx); done {
		return o, ok
	}
	if r.run.Shell != "" {
		return r.shellRun(ctx)
	}
	if o, ok, done := r.resume(ctx); done {
		return o, ok
	}
	if o, ok, done := r.compactOnRequest(ctx); done {
		return o, ok
	}
	for {
		if o, ok, done := r.nextStep(ctx); done {
			return o, ok
		}
	}
}

// prepare claims the run (begin) and resolves its model and tools.
func (r *runner) prepare(ctx context.Context) (outcome, bool, bool) {
	if err := r.begin(ctx); err != nil {
		if errors.Is(err, errAlreadyEnded) {
			return outcome{}, false, true
		}
		o, ok := r.cancelled(ctx, err)
		return o, ok, true
	}
	if err := r.setup(ctx); err != nil {
		if ctx.Err() != nil {
			o, ok := r.cancelled(ctx, err)
			return o, ok, true
		}
		return modelError(err), true, true
	}
	return outcome{}, false, false
}

// resume continues a step cut off while its tool calls waited for
// permission (or ran): with those calls, not with a new model call.
func (r *runner) resume(ctx context.Context) (outcome, bool, bool) {
	s, err := r.unfinishedStep(ctx)
	if err != nil {
		o, ok := r.cancelled(ctx, err)
		return o, ok, true
	}
	if s == nil {
		return outcome{}, false, false
	}
	r.step = s
	o, done := r.runTools(ctx)
	r.finishStep(ctx)
	if !done {
		return outcome{}, false, false
	}
	if o.state == "" {
		o, ok := r.cancelled(ctx, ctx.Err())
		return o, ok, true
	}
	return o, true, true
}

// compactOnRequest serves a run started to compact the session
// (summarize): it compacts, then answers only prompts steered into it
// meanwhile.
func (r *runner) compactOnRequest(ctx context.Context) (outcome, bool, bool) {
	asked, done, err := r.compactionRequest(ctx)
	if err != nil {
		o, ok := r.cancelled(ctx, err)
		return o, ok, true
	}
	if !asked {
		return outcome{}, false, false
	}
	if !done {
		if err := r.setPhase(ctx, core.PhaseCompacting); err != nil {
			o, ok := r.cancelled(ctx, err)
			return o, ok, true
		}
		if o, d := r.summarize(ctx, false, false, ""); d {
			o, ok := r.settle(ctx, o)
			return o, ok, true
		}
	}
	more, err := unansweredTx(ctx, r.e.st, r.run, r.run.UserMessageID)
	if err != nil {
		o, ok := r.cancelled(ctx, err)
		return o, ok, true
	}
	if !more {
		return succeeded, true, true
	}
	return outcome{}, false, false
}

// nextStep runs one step: the model is called with the history (compacted
// first when it would not fit) and the tools it asks for run. It is done
// when the model gave its answer, the step budget is spent or the run
// cannot go on.
func (r *runner) nextStep(ctx context.Context) (outcome, bool, bool) {
	if r.run.Steps >= r.maxSteps {
		return outcome{state: core.RunFailed, reason: core.ReasonMaxSteps,
			err: core.UnknownError(core.RefMaxSteps, fmt.Sprintf("run stopped after %d steps", r.maxSteps))}, true, true
	}
	history, parentID, err := r.history(ctx)
	if err != nil {
		o, ok := r.cancelled(ctx, err)
		return o, ok, true
	}
	if o, ok, done := r.overBudget(ctx); done {
		return o, ok, true
	}
	if r.needsCompaction(history) {
		if o, done := r.compact(ctx, false); done {
			o, ok := r.settle(ctx, o)
			return o, ok, true
		}
		return outcome{}, false, false
	}
	if err := r.startStep(ctx, parentID); err != nil {
		o, ok := r.cancelled(ctx, err)
		return o, ok, true
	}
	req := r.request(history)
	step := plugin.StepInput{SessionID: r.run.SessionID, Directory: r.dir, MessageID: parentID, Agent: r.agent.Name, Model: r.run.Model, Allowed: r.toolAllowed}
	if err := r.e.cfg.Hooks.Request(ctx, step, &req); err != nil {
		return outcome{state: core.RunFailed, reason: core.ReasonInternal, err: core.UnknownError(core.RefInternal, err.Error())}, true, true
	}
	o, done := r.callWithRetry(ctx, r.provider, req)
	switch {
	case done:
		o, ok := r.settle(ctx, o)
		return o, ok, true
	case o.state == stateCompacted:
		// The provider refused the step as too long; it was compacted
		// and the step runs again.
		return outcome{}, false, false
	case len(r.step.calls) > 0:
		return r.afterTools(ctx)
	case r.structured != nil:
		return structuredFailure("Model did not produce structured output", r.structured.failed), true, true
	}
	// The model is done. A message steered into the run after this step
	// began is caught by finish, which sends the loop round again.
	return succeeded, true, true
}

// afterTools runs the step's tool calls and closes the step; a structured
// answer among them ends the run.
func (r *runner) afterTools(ctx context.Context) (outcome, bool, bool) {
	o, done := r.runTools(ctx)
	r.finishStep(ctx)
	if done {
		o, ok := r.settle(ctx, o)
		return o, ok, true
	}
	if r.structured != nil && r.structured.answer != nil {
		r.step.msg.Structured = r.structured.answer
		msg := r.step.msg
		r.later(func(w *writer) { w.message(msg) })
		return succeeded, true, true
	}
	return outcome{}, false, false
}

// overBudget asks Config.Budget whether the run may call the model again:
// what it spent so far is on its messages (the step just ended is on
// r.step, fresher than its stored copy). done, with ok and the outcome as
// nextStep returns them, when the run must not call the model: its budget
// is spent, or the check could not be made (a run stopping for shutdown
// or fencing is not ok, and is left to its next owner).
func (r *runner) overBudget(ctx context.Context) (_ outcome, ok, done bool) {
	if r.e.cfg.Budget == nil {
		return outcome{}, false, false
	}
	var last *core.Message
	if r.step != nil {
		last = &r.step.msg
	}
	failure, err := r.e.cfg.Budget.Check(ctx, r.run.SessionID, budget.RunSpend(r.own, last))
	if err != nil {
		o, ok := r.cancelled(ctx, err)
		return o, ok, true
	}
	if failure == nil {
		return outcome{}, false, false
	}
	return outcome{state: core.RunFailed, reason: core.ReasonBudgetExceeded, err: failure}, true, true
}

var errAlreadyEnded = errors.New("run already ended")

// stateCompacted is the pseudo-outcome of a step the provider refused as
// too long and that was compacted: the loop goes round again.
const stateCompacted = "compacted"

// settle turns the result of a part of the loop that ended the run into
// the run's outcome (an empty state means the context was cancelled).
func (r *runner) settle(ctx context.Context, o outcome) (outcome, bool) {
	if o.state == "" {
		return r.cancelled(ctx, ctx.Err())
	}
	return o, true
}

// cancelled decides what a failure in the loop means: an abort, a
// shutdown, or an internal error.
func (r *runner) cancelled(ctx context.Context, err error) (outcome, bool) {
	cause := context.Cause(ctx)
	var ab *abortCause
	if errors.As(cause, &ab) {
		return outcome{state: core.RunInterrupted, reason: ab.reason,
			err: core.AbortedError("The operation was aborted.")}, true
	}
	if errors.Is(cause, errShutdown) || errors.Is(cause, errFenced) || errors.Is(err, store.ErrFenced) {
		return outcome{}, false
	}
	if err == nil {
		err = cause
	}
	if err == nil && r.lost != nil {
		// Some paths drop a write's error on the way; the store noted it.
		err = r.lost.Err()
	}
	if err == nil {
		err = errors.New("run stopped without a cause")
	}
	if !errors.Is(err, store.ErrStorage) {
		// A storage failure is not the run's: execute sets the outcome
		// aside, and the store's watcher has logged it.
		r.e.log.Error("run failed", "run", r.run.ID, "err", err)
	}
	return outcome{state: core.RunFailed, reason: core.ReasonInternal, err: core.UnknownError(core.RefInternal, err.Error())}, true
}

// begin marks the run running. A run admitted to start at once is running
// already: the read says so, and nothing is written.
func (r *runner) begin(ctx context.Context) error {
	if r.hasPending() {
		// Back round the loop (a message was steered in as the run was
		// ending): what the last step left pending goes first.
		if err := r.tx(ctx, func(store.Tx) error { return nil }); err != nil {
			return err
		}
	}
	run, err := r.e.st.Run(ctx, r.run.ID)
	if err != nil {
		return err
	}
	if core.TerminalState(run.State) {
		return errAlreadyEnded
	}
	if run.State == core.RunRunning {
		// Resumed or re-entered: the first step (or the permission
		// answer) changes the phase; nothing to write here.
		r.run = run
		return nil
	}
	return r.tx(ctx, func(tx store.Tx) error {
		run, err := lockedRunOf(ctx, tx, r.run.SessionID, r.run.ID)
		if err != nil {
			return err
		}
		if core.TerminalState(run.State) {
			return errAlreadyEnded
		}
		if run.State != core.RunRunning {
			if err := run.Apply(core.OnStart); err != nil {
				return err
			}
			if run.Time.Started == 0 {
				run.Time.Started = r.e.now()
			}
			w := writer{ctx: ctx, tx: tx}
			w.run(run)
			if w.err != nil {
				return w.err
			}
		}
		r.run = run
		return nil
	})
}

// maxParallelTasks bounds the subagents one step runs at once.
const maxParallelTasks = 4

// toolStopGrace is how long a cancelled tool call has to return (a shell
// gets SIGTERM, then SIGKILL after 200 ms) before the run stops waiting.
const toolStopGrace = 600 * time.Millisecond
