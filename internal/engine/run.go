package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/agent"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/metrics"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/tool"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// outcome is how a run ends.
type outcome struct {
	state  string
	reason string
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
			r.keepHistory()
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
	// own is the run's part of the transcript as the last step read it
	// (see history); nil when it must be read whole again.
	own []core.MessageWithParts
	// recent holds the tool calls of this run, for the doom-loop guard.
	recent []string

	// What setup prepared for every step.
	agent    agent.Agent
	provider llm.Provider
	model    llm.Model
	system   []string
	tools    []llm.ToolSpec
	options  map[string]any
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

// step is one model call and the parts it produced, kept in memory so that
// streamed text can be coalesced and open parts closed on abort.
type step struct {
	msg       core.Message
	text      *stream
	reasoning *stream
	lastFlush time.Time
	calls     []*core.Part
	usage     llm.Usage
	finish    string
	streamed  bool
	// announced is set once the step's message was published live.
	announced bool
	// finishPart is the step-finish part, held back while the step's tool
	// calls run (finishStep writes it after them).
	finishPart *core.Part
}

// stream is a part being streamed. Its text grows in a builder (appending
// to a string would copy all of it on every delta) and is copied into the
// part when the part is written.
type stream struct {
	part    *core.Part
	buf     strings.Builder
	flushed int // length of the text last written
}

// sync brings the part's text up to date and returns the part.
func (st *stream) sync() *core.Part {
	st.part.Text = st.buf.String()
	return st.part
}

// open returns the step's streamed parts, reasoning first, up to date.
func (s *step) open() []*core.Part {
	var out []*core.Part
	for _, st := range []*stream{s.reasoning, s.text} {
		if st != nil {
			out = append(out, st.sync())
		}
	}
	return out
}

// due reports whether streamed text should be written now: at least
// FlushInterval since the last write, and, for a long part, half again more
// text than was written then, so that writing snapshots costs a constant
// factor of the text's size however long it grows.
func (s *step) due(interval time.Duration) bool {
	if time.Since(s.lastFlush) < interval {
		return false
	}
	for _, st := range []*stream{s.reasoning, s.text} {
		if st == nil {
			continue
		}
		if n := st.buf.Len(); n > st.flushed && (n < smallPart || n-st.flushed >= st.flushed/2) {
			return true
		}
	}
	return false
}

// smallPart is the size below which streamed text is written at every
// interval.
const smallPart = 1 << 10

// loop executes steps until the run ends. ok is false when the engine is
// shutting down and the run must be left as it is.
func (r *runner) loop(ctx context.Context) (o outcome, ok bool) {
	if err := r.begin(ctx); err != nil {
		if errors.Is(err, errAlreadyEnded) {
			return outcome{}, false
		}
		return r.cancelled(ctx, err)
	}
	if err := r.setup(ctx); err != nil {
		if ctx.Err() != nil {
			return r.cancelled(ctx, err)
		}
		return modelError(err), true
	}
	if r.run.Shell != "" {
		return r.shellRun(ctx)
	}
	// A step cut off while its tool calls waited for permission continues
	// with those calls, not with a new model call.
	if s, err := r.unfinishedStep(ctx); err != nil {
		return r.cancelled(ctx, err)
	} else if s != nil {
		r.step = s
		o, done := r.runTools(ctx)
		r.finishStep(ctx)
		if done {
			if o.state == "" {
				return r.cancelled(ctx, ctx.Err())
			}
			return o, true
		}
	}
	// A run started to compact the session (summarize) compacts, then
	// answers only prompts steered into it meanwhile.
	if asked, done, err := r.compactionRequest(ctx); err != nil {
		return r.cancelled(ctx, err)
	} else if asked {
		if !done {
			if err := r.setPhase(ctx, core.PhaseCompacting); err != nil {
				return r.cancelled(ctx, err)
			}
			if o, d := r.summarize(ctx, false, false, ""); d {
				return r.settle(ctx, o)
			}
		}
		more, err := unansweredTx(ctx, r.e.st, r.run, r.run.UserMessageID)
		if err != nil {
			return r.cancelled(ctx, err)
		}
		if !more {
			return succeeded, true
		}
	}
	for {
		if r.run.Steps >= r.maxSteps {
			return outcome{state: core.RunFailed, reason: core.ReasonMaxSteps,
				err: core.UnknownError(core.RefMaxSteps, fmt.Sprintf("run stopped after %d steps", r.maxSteps))}, true
		}
		history, parentID, err := r.history(ctx)
		if err != nil {
			return r.cancelled(ctx, err)
		}
		if r.needsCompaction(history) {
			if o, done := r.compact(ctx, false); done {
				return r.settle(ctx, o)
			}
			continue
		}
		if err := r.startStep(ctx, parentID); err != nil {
			return r.cancelled(ctx, err)
		}
		o, done := r.callWithRetry(ctx, r.provider, r.request(history))
		if done {
			return r.settle(ctx, o)
		}
		if o.state == stateCompacted {
			// The provider refused the step as too long; it was compacted
			// and the step runs again.
			continue
		}
		if len(r.step.calls) > 0 {
			o, done := r.runTools(ctx)
			r.finishStep(ctx)
			if done {
				return r.settle(ctx, o)
			}
			if r.structured != nil && r.structured.answer != nil {
				// The structured answer ends the run.
				r.step.msg.Structured = r.structured.answer
				msg := r.step.msg
				r.later(func(w *writer) { w.message(msg) })
				return succeeded, true
			}
			continue
		}
		if r.structured != nil {
			return structuredFailure("Model did not produce structured output", r.structured.failed), true
		}
		// The model is done. A message steered into the run after this
		// step began is caught by finish, which sends the loop round again.
		return succeeded, true
	}
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
		run, err := lockedRun(ctx, tx, r.run.ID)
		if err != nil {
			return err
		}
		if core.TerminalState(run.State) {
			return errAlreadyEnded
		}
		if run.State != core.RunRunning {
			run.State = core.RunRunning
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

// startStep creates the step's assistant message with its step-start part.
func (r *runner) startStep(ctx context.Context, parentID string) error {
	now := r.e.now()
	sess, err := r.e.st.Session(ctx, r.run.SessionID)
	if err != nil {
		return err
	}
	return r.openStep(ctx, assistantMessage(r.run, sess, parentID, now), nil)
}

// openStep writes a step's assistant message and its step-start part,
// after what before writes, and counts the step. The writes wait for the
// runner's next transaction (see later.go).
func (r *runner) openStep(ctx context.Context, msg core.Message, before func(*writer)) error {
	r.step = &step{msg: msg, lastFlush: time.Now()}
	r.justCompacted = false
	run := r.run
	run.Steps++
	recovering := run.Phase == core.PhaseRecovering
	if recovering {
		// The first new step after a restart ends recovery; the status
		// changes from busy/recovering to busy.
		run.Phase = ""
	}
	r.run = run
	start := core.Part{ID: core.NewID(core.PrefixPart, false), SessionID: msg.SessionID, MessageID: msg.ID, Type: core.PartStepStart,
		Snapshot: r.startSnapshot(ctx, msg.CWD)}
	run.Snapshot, run.SnapshotEnd = r.run.Snapshot, r.run.SnapshotEnd
	r.later(func(w *writer) {
		if before != nil {
			before(w)
		}
		w.message(msg)
		w.part(start)
		if recovering {
			w.status(run.SessionID, core.StatusOf(&run, nil))
		}
		w.run(run)
	})
	r.beginStepSpan(ctx)
	return nil
}

// unfinishedStep returns the run's last step when it still has tool calls
// that never ran (they were waiting for a permission when the server
// stopped).
func (r *runner) unfinishedStep(ctx context.Context) (*step, error) {
	if r.step != nil {
		return nil, nil
	}
	m, err := r.e.st.LastRunMessage(ctx, r.run.ID, core.RoleAssistant)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	s := &step{msg: m.Info}
	open := false
	for j := range m.Parts {
		if m.Parts[j].Type == core.PartTool {
			p := m.Parts[j]
			s.calls = append(s.calls, &p)
			_, waitsForChild := childOf(p)
			open = open || notStarted(p) || (waitsForChild && p.State.Status == core.ToolRunning)
		}
	}
	if !open {
		return nil, nil
	}
	return s, nil
}

// callWithRetry makes the model call, retrying retryable failures within
// the budget. done is true when the run must end (o.state empty means the
// context was cancelled).
func (r *runner) callWithRetry(ctx context.Context, p llm.Provider, req llm.Request) (o outcome, done bool) {
	e := r.e
	first := time.Now()
	for attempt := 1; ; attempt++ {
		req.Attempt = attempt
		err := r.modelCall(ctx, p, req)
		if err == nil {
			if ferr := r.endStep(ctx, nil); ferr != nil {
				return outcome{}, true
			}
			return outcome{}, false
		}
		if ctx.Err() != nil {
			return outcome{}, true
		}
		var werr *writeError
		if errors.As(err, &werr) {
			// Not the provider's failure: agentd's own, or the storage's
			// (which pauses the run instead).
			if o, ok := r.cancelled(ctx, werr); ok {
				return o, true
			}
			return outcome{}, true
		}
		var apiErr *llm.APIError
		if !errors.As(err, &apiErr) {
			apiErr = &llm.APIError{Message: err.Error(), Retryable: false}
		}
		cerr := apiError(apiErr, r.run.Model.ProviderID)
		if apiErr.ContextOverflow && !r.compacting {
			cerr = &core.Error{Name: "ContextOverflowError", Data: core.ErrorData{Message: apiErr.Message,
				Extra: map[string]any{"responseBody": apiErr.Body}}}
			if apiErr.Body == "" {
				cerr.Data.Extra = nil
			}
			_ = r.endStep(ctx, cerr)
			if r.overflowRetried {
				return outcome{state: core.RunFailed, reason: core.ReasonProviderError, err: cerr}, true
			}
			// The request did not fit: compact, then run the step again,
			// once.
			r.overflowRetried = true
			if o, done := r.compact(ctx, true); done {
				return o, true
			}
			return outcome{state: stateCompacted}, false
		}
		if !apiErr.Retryable {
			_ = r.endStep(ctx, cerr)
			return outcome{state: core.RunFailed, reason: core.ReasonProviderError, err: cerr}, true
		}
		delay := backoff(e.cfg.Retry, attempt, apiErr.RetryAfter)
		if attempt >= e.cfg.Retry.MaxAttempts || time.Since(first)+delay > e.cfg.Retry.MaxElapsed {
			_ = r.endStep(ctx, cerr)
			return outcome{state: core.RunFailed, reason: core.ReasonRetriesExhausted, err: cerr}, true
		}
		if r.step.streamed {
			// Output had started: keep it visible, marked, and answer
			// afresh in a new message so no text is silently duplicated.
			if err := r.endStep(ctx, core.UnknownError(core.RefStreamRetried, "stream broke after output started; the step was retried: "+apiErr.Message)); err != nil {
				return outcome{}, true
			}
			if err := r.startStep(ctx, r.step.msg.ParentID); err != nil {
				return outcome{}, true
			}
		}
		e.cfg.Metrics.Retry(r.run.Model.ProviderID, r.run.Model.ModelID)
		if err := r.waitRetry(ctx, attempt, apiErr.Message, delay); err != nil {
			return outcome{}, true
		}
	}
}

// apiError converts a provider error into opencode's error shape.
func apiError(a *llm.APIError, providerID string) *core.Error {
	if a.Auth {
		return &core.Error{Name: core.ErrNameProviderAuth, Data: core.ErrorData{Message: a.Message, Extra: map[string]any{"providerID": providerID}}}
	}
	extra := map[string]any{"isRetryable": a.Retryable}
	if a.StatusCode != 0 {
		extra["statusCode"] = a.StatusCode
	}
	if len(a.Headers) > 0 {
		extra["responseHeaders"] = a.Headers
	}
	if a.Body != "" {
		extra["responseBody"] = a.Body
	}
	return &core.Error{Name: core.ErrNameAPI, Data: core.ErrorData{Message: a.Message, Extra: extra}}
}

// waitRetry records the retry status, waits, and returns to busy.
func (r *runner) waitRetry(ctx context.Context, attempt int, msg string, delay time.Duration) error {
	next := time.Now().Add(delay).UnixMilli()
	err := r.setState(ctx, func(run *core.Run) {
		run.State, run.Attempt, run.RetryMessage, run.NextRetry = core.RunRetrying, attempt, msg, next
	})
	if err != nil {
		return err
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	return r.setState(ctx, func(run *core.Run) {
		run.State, run.Attempt, run.RetryMessage, run.NextRetry = core.RunRunning, 0, "", 0
	})
}

// setState changes the run and publishes the session status it implies,
// in one transaction.
func (r *runner) setState(ctx context.Context, change func(*core.Run)) error {
	return r.tx(ctx, func(tx store.Tx) error {
		run := r.run
		change(&run)
		w := writer{ctx: ctx, tx: tx}
		w.run(run)
		w.status(run.SessionID, core.StatusOf(&run, nil))
		if w.err == nil {
			r.run = run
		}
		return w.err
	})
}

// callOnce streams one model call into the current step.
func (r *runner) callOnce(ctx context.Context, p llm.Provider, req llm.Request) error {
	s := r.step
	return p.Stream(ctx, req, func(ev llm.Event) error {
		switch ev.Kind {
		case llm.EventText, llm.EventReasoning:
			if ev.Signature != "" {
				r.signReasoning(ev.Signature)
			}
			if ev.Text == "" {
				break
			}
			if err := r.delta(ctx, ev.Kind, ev.Text); err != nil {
				return &writeError{err}
			}
		case llm.EventToolCall:
			if err := r.closeText(ctx); err != nil {
				return &writeError{err}
			}
			input := ev.Input
			if len(input) == 0 || !json.Valid(input) {
				input = json.RawMessage("{}")
			}
			part := &core.Part{ID: core.NewID(core.PrefixPart, false), SessionID: s.msg.SessionID, MessageID: s.msg.ID,
				Type: core.PartTool, CallID: ev.CallID, Tool: ev.Name,
				State: core.ToolState{Status: core.ToolPending, Input: input, Raw: string(ev.Input)}}
			s.calls = append(s.calls, part)
			s.streamed = true
			// The pending part is written with the step's end, in the same
			// transaction as step-finish; it is written running before the
			// tool executes.
			return nil
		case llm.EventFinish:
			s.usage, s.finish = ev.Usage, ev.Finish
		}
		return nil
	})
}

// writeError is a write of the streamed output that failed: the step
// stopped because of agentd, not because of the provider.
type writeError struct{ err error }

func (w *writeError) Error() string { return "write streamed output: " + w.err.Error() }
func (w *writeError) Unwrap() error { return w.err }

// delta appends streamed text, publishes it live and persists it at most
// every FlushInterval.
func (r *runner) delta(ctx context.Context, kind, text string) error {
	s := r.step
	s.streamed = true
	pp := &s.text
	typ := core.PartText
	if kind == llm.EventReasoning {
		pp, typ = &s.reasoning, core.PartReasoning
	}
	if *pp == nil {
		*pp = &stream{part: &core.Part{ID: core.NewID(core.PrefixPart, false), SessionID: s.msg.SessionID, MessageID: s.msg.ID,
			Type: typ, Time: core.PartTime{Start: r.e.now()}}}
		r.announce(*(*pp).part)
	}
	st := *pp
	st.buf.WriteString(text)
	p := st.part
	r.e.hub.PublishLive(core.MustEvent(p.SessionID, core.EventPartDelta, core.DeltaProps{
		SessionID: p.SessionID, MessageID: p.MessageID, PartID: p.ID, Field: "text", Delta: text}))
	if s.due(r.e.cfg.FlushInterval) {
		// A part just created waits too: within the interval it rides
		// along with the step's end.
		return r.flushParts(ctx, false)
	}
	return nil
}

// signReasoning records the provider's signature of the reasoning part
// streamed so far, where opencode keeps it (the part's metadata, by
// provider); it is written with the part, and sent back with the
// reasoning in later steps.
func (r *runner) signReasoning(sig string) {
	if st := r.step.reasoning; st != nil {
		st.part.Metadata = map[string]any{"anthropic": map[string]any{"signature": sig}}
	}
}

// flushParts persists the open text and reasoning parts; with end set it
// also closes them.
func (r *runner) flushParts(ctx context.Context, end bool) error {
	s := r.step
	if s == nil || (s.text == nil && s.reasoning == nil) {
		return nil
	}
	s.lastFlush = time.Now()
	now := r.e.now()
	parts := s.open()
	err := r.tx(ctx, func(tx store.Tx) error {
		w := writer{ctx: ctx, tx: tx}
		for _, p := range parts {
			if end && p.Time.End == 0 {
				p.Time.End = now
			}
			w.part(*p)
		}
		return w.err
	})
	if err == nil {
		for _, st := range []*stream{s.reasoning, s.text} {
			if st != nil {
				st.flushed = len(st.part.Text)
			}
		}
	}
	return err
}

func (r *runner) closeText(ctx context.Context) error {
	if err := r.flushParts(ctx, true); err != nil {
		return err
	}
	r.step.text, r.step.reasoning = nil, nil
	return nil
}

// endStep closes the step: final text, step-finish, and the assistant
// message's accounting (and error, when the step failed). The writes wait
// for the runner's next transaction: the end of the run, or the running
// state of the first tool call.
func (r *runner) endStep(ctx context.Context, failure *core.Error) error {
	s := r.step
	now := r.e.now()
	tokens := core.Tokens{Input: s.usage.Input, Output: s.usage.Output, Reasoning: s.usage.Reasoning,
		Cache: core.CacheTokens{Read: s.usage.CacheRead, Write: s.usage.CacheWrite}}
	cost := r.model.Cost.Cost(s.usage)
	if in := s.usage.Input + s.usage.CacheRead + s.usage.CacheWrite; in > 0 {
		r.lastInput = in
	}
	var parts []core.Part
	for _, p := range s.open() {
		if p.Time.End == 0 {
			p.Time.End = now
		}
		parts = append(parts, *p)
	}
	finish := s.finish
	if failure != nil {
		finish = "error"
	} else if finish == "" {
		finish = "stop"
	}
	for _, p := range s.calls {
		if p.State.Status != core.ToolPending {
			continue
		}
		if failure != nil {
			// The step failed: its calls will not run.
			p.State = core.ToolState{Status: core.ToolError, Input: p.State.Input, Error: "not run: the model call failed",
				Time: core.PartTime{Start: now, End: now}}
		}
		parts = append(parts, *p)
	}
	finishPart := core.Part{ID: core.NewID(core.PrefixPart, false), SessionID: s.msg.SessionID, MessageID: s.msg.ID,
		Type: core.PartStepFinish, Reason: finish, Tokens: tokens, Cost: cost, Snapshot: r.snap}
	if failure == nil && len(s.calls) > 0 {
		// The step ends once its tool calls have run (finishStep), as
		// opencode's clients expect step-finish after a step's tools.
		s.finishPart = &finishPart
	} else {
		parts = append(parts, finishPart)
	}
	var run *core.Run
	if failure == nil && r.run.Resumes > 0 {
		// A completed step proves the run is not crash-looping.
		next := r.run
		next.Resumes = 0
		r.run, run = next, &next
	}
	s.msg.Tokens = s.msg.Tokens.Add(tokens)
	s.msg.Cost += cost
	s.msg.Finish = finish
	s.msg.Completed = now
	if failure != nil {
		s.msg.Error = failure
	}
	msg := s.msg
	sessionID := r.run.SessionID
	r.later(func(w *writer) {
		if cost > 0 || tokens != (core.Tokens{}) {
			// The session's totals move with each step, in the same
			// transaction as the step's own accounting.
			sess, err := w.tx.Session(w.ctx, sessionID)
			if err != nil {
				if w.err == nil {
					w.err = err
				}
				return
			}
			sess.Cost += cost
			sess.Tokens = sess.Tokens.Add(tokens)
			w.session(sess)
		}
		for _, p := range parts {
			w.part(p)
		}
		if run != nil {
			w.run(*run)
		}
		w.message(msg)
	})
	s.text, s.reasoning = nil, nil
	r.e.cfg.Metrics.Used(r.run.Model.ProviderID, r.run.Model.ModelID, metrics.Usage{Input: s.usage.Input,
		Output: s.usage.Output, Reasoning: s.usage.Reasoning, CacheRead: s.usage.CacheRead, CacheWrite: s.usage.CacheWrite, Cost: cost})
	if failure != nil && r.stepSpan != nil {
		r.stepSpan.SetStatus(codes.Error, failure.Data.Message)
	}
	return nil
}

// runTools executes the step's tool calls in order. Each call is recorded
// as running before it executes, so a crash can never replay it silently.
// Task calls (subagents) run at the same time as the calls after them, at
// most maxParallelTasks at once; a task call cut off while it waited for
// its child is taken up again (it waits for the same child).
func (r *runner) runTools(ctx context.Context) (outcome, bool) {
	e := r.e
	sess, err := e.st.Session(ctx, r.run.SessionID)
	if err != nil {
		return outcome{}, true
	}
	type ended struct {
		o    outcome
		done bool
	}
	var (
		tasks []chan ended
		slots = make(chan struct{}, maxParallelTasks)
		wait  = func() (outcome, bool) {
			var first ended
			for _, ch := range tasks {
				if x := <-ch; x.done && !first.done {
					first = x
				}
			}
			tasks = nil
			return first.o, first.done
		}
	)
	for _, p := range r.step.calls {
		_, resumed := childOf(*p)
		resumed = resumed && p.State.Status == core.ToolRunning
		if !notStarted(*p) && !resumed {
			continue // done before a restart
		}
		if p.Tool == StructuredOutputTool && r.structured != nil {
			if o, done := r.structuredCall(ctx, p); done {
				wait()
				return o, true
			}
			continue
		}
		t, ok := e.tool(p.Tool)
		ok = ok && (r.agent.Name == "" || r.toolAllowed(p.Tool))
		call := tool.Call{ID: p.ID, Scope: e.cfg.ToolScope, SessionID: p.SessionID, MessageID: p.MessageID, CallID: p.CallID,
			Directory: sess.Directory, Input: p.State.Input, ReadDirs: []string{filepath.Join(e.cfg.OutputDir, p.SessionID)}, Env: e.cfg.ToolEnv,
			Todos: func(ctx context.Context) ([]core.Todo, error) { return e.st.Todos(ctx, sess.ID) }}
		var refused *tool.Result
		if ok && !resumed {
			refused, err = r.authorize(ctx, sess, p, t, &call)
			if err != nil {
				wait()
				return outcome{}, true
			}
		}
		if ok && refused == nil && p.Tool == QuestionToolName {
			// Answered by the user, not run: the answer is the result.
			res, err := r.askQuestion(ctx, p)
			if err != nil {
				wait()
				return outcome{}, true
			}
			refused = &res
		}
		if !resumed {
			p.State = core.ToolState{Status: core.ToolRunning, Input: p.State.Input, Time: core.PartTime{Start: e.now()}}
			if err := r.putPart(ctx, *p); err != nil {
				wait()
				return outcome{}, true
			}
		}
		if ok && refused == nil && p.Tool == TaskToolName {
			ch := make(chan ended, 1)
			tasks = append(tasks, ch)
			go func() {
				select {
				case slots <- struct{}{}:
					defer func() { <-slots }()
				case <-ctx.Done():
					ch <- ended{done: true}
					return
				}
				o, done := r.execTool(ctx, t, call, p, nil)
				ch <- ended{o, done}
			}()
			continue
		}
		if !ok {
			res := tool.Errorf(fmt.Sprintf("unknown tool %q: the tools offered are listed in the request", p.Tool))
			refused = &res
		}
		if o, done := r.execTool(ctx, t, call, p, refused); done {
			wait()
			return o, true
		}
	}
	return wait()
}

// maxParallelTasks bounds the subagents one step runs at once.
const maxParallelTasks = 4

// execTool runs one call (or records the refusal given instead) and writes
// its end, with the todo list it carries in the same transaction.
func (r *runner) execTool(ctx context.Context, t tool.Tool, call tool.Call, p *core.Part, refused *tool.Result) (outcome, bool) {
	e := r.e
	var res tool.Result
	sctx, span := r.toolSpan(ctx, p.Tool, p.CallID)
	defer span.End()
	start := time.Now()
	if refused != nil {
		res = *refused
	} else {
		var err error
		call.Progress = r.progress(*p)
		res, err = r.runTool(sctx, t, call)
		if ctx.Err() != nil {
			return outcome{}, true
		}
		if err != nil {
			e.cfg.Metrics.ToolCall(p.Tool, core.ToolError, time.Since(start))
			span.SetStatus(codes.Error, err.Error())
			res = tool.Errorf("internal error: " + err.Error())
			p.State = toolEnd(p.State, res, e.now())
			_ = r.putPart(ctx, *p)
			return outcome{state: core.RunFailed, reason: core.ReasonInternal, err: core.UnknownError(core.RefInternal, fmt.Sprintf("tool %s: %v", p.Tool, err))}, true
		}
		res = r.bound(p, res)
	}
	p.State = toolEnd(p.State, res, e.now())
	result := core.ToolCompleted
	if res.IsError {
		result = core.ToolError
		span.SetStatus(codes.Error, "the tool answered with an error")
	}
	e.cfg.Metrics.ToolCall(p.Tool, result, time.Since(start))
	err := r.tx(ctx, func(tx store.Tx) error {
		w := writer{ctx: ctx, tx: tx}
		w.part(*p)
		if res.Todos != nil && !res.IsError {
			w.todos(p.SessionID, *res.Todos)
		}
		return w.err
	})
	if err != nil {
		return outcome{}, true
	}
	return outcome{}, false
}

// runTool runs a tool call, but stops waiting for it when the run is
// cancelled: an abort (or a shutdown) must not wait on a tool that does
// not honour its context. The tool is left to finish on its own.
func (r *runner) runTool(ctx context.Context, t tool.Tool, call tool.Call) (tool.Result, error) {
	type result struct {
		res tool.Result
		err error
	}
	ch := make(chan result, 1)
	go func() {
		res, err := t.Run(ctx, call)
		ch <- result{res, err}
	}()
	select {
	case out := <-ch:
		return out.res, out.err
	case <-ctx.Done():
		select {
		case out := <-ch:
			return out.res, out.err
		case <-time.After(toolStopGrace):
			r.e.log.Warn("tool did not stop when its run was cancelled; left behind", "tool", t.Name(), "part", call.ID)
			return tool.Result{}, ctx.Err()
		}
	}
}

// toolStopGrace is how long a cancelled tool call has to return (a shell
// gets SIGTERM, then SIGKILL after 200 ms) before the run stops waiting.
const toolStopGrace = 600 * time.Millisecond

func toolEnd(st core.ToolState, res tool.Result, now int64) core.ToolState {
	out := core.ToolState{Input: st.Input, Title: res.Title, Metadata: res.Metadata, Time: core.PartTime{Start: st.Time.Start, End: now}}
	if res.IsError {
		out.Status, out.Error = core.ToolError, res.Output
	} else {
		out.Status, out.Output = core.ToolCompleted, res.Output
	}
	return out
}

func (r *runner) putPart(ctx context.Context, p core.Part) error {
	return r.tx(ctx, func(tx store.Tx) error {
		w := writer{ctx: ctx, tx: tx}
		w.part(p)
		return w.err
	})
}

// flushOnShutdown persists streamed text so a restart loses nothing that
// was produced before the shutdown.
func (r *runner) flushOnShutdown(ctx context.Context) {
	if r.step == nil {
		return
	}
	wctx, cancel := detached(ctx)
	defer cancel()
	err := r.flushParts(wctx, false)
	if err == nil {
		// flushParts carried the pending writes, unless it had no text.
		err = r.tx(wctx, func(store.Tx) error { return nil })
	}
	if err != nil {
		r.e.log.Warn("flush on shutdown", "run", r.run.ID, "err", err)
	}
}
