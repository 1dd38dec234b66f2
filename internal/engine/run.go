package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/tool"
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

// execute runs one run to its end, or until shutdown.
func (e *Engine) execute(run core.Run) {
	ctx, h := e.register(run.ID)
	defer e.unregister(h)
	r := &runner{e: e, run: run}
	for {
		o, ok := r.loop(ctx)
		if !ok {
			// Shutdown: leave the run non-terminal for the next start.
			r.flushOnShutdown(ctx)
			return
		}
		wctx, cancel := detached(ctx)
		err := e.finish(wctx, r.run.ID, o, r.step)
		cancel()
		if errors.Is(err, errSteered) {
			continue
		}
		if err != nil {
			// The run stays non-terminal; the next start recovers it.
			e.log.Error("write run outcome", "run", run.ID, "err", err)
			return
		}
		e.runEnded(run.ID)
		return
	}
}

// runner holds one executing run and its current step.
type runner struct {
	e    *Engine
	run  core.Run
	step *step
	// prefix is the conversation before this run, converted once.
	prefix []llm.Message
	// recent holds the tool calls of this run, for the doom-loop guard.
	recent []string
}

// step is one model call and the parts it produced, kept in memory so that
// streamed text can be coalesced and open parts closed on abort.
type step struct {
	msg       core.Message
	text      *core.Part
	reasoning *core.Part
	lastFlush time.Time
	calls     []*core.Part
	usage     llm.Usage
	finish    string
	streamed  bool
}

// loop executes steps until the run ends. ok is false when the engine is
// shutting down and the run must be left as it is.
func (r *runner) loop(ctx context.Context) (o outcome, ok bool) {
	e := r.e
	if err := r.begin(ctx); err != nil {
		if errors.Is(err, errAlreadyEnded) {
			return outcome{}, false
		}
		return r.cancelled(ctx, err)
	}
	provider, modelName, err := e.models.Resolve(r.run.Model)
	if err != nil {
		return outcome{state: core.RunFailed, reason: core.ReasonProviderError, err: core.UnknownError(core.RefModelNotFound, err.Error())}, true
	}
	// A step cut off while its tool calls waited for permission continues
	// with those calls, not with a new model call.
	if s, err := r.unfinishedStep(ctx); err != nil {
		return r.cancelled(ctx, err)
	} else if s != nil {
		r.step = s
		if o, done := r.runTools(ctx); done {
			if o.state == "" {
				return r.cancelled(ctx, ctx.Err())
			}
			return o, true
		}
	}
	for {
		if r.run.Steps >= e.cfg.MaxSteps {
			return outcome{state: core.RunFailed, reason: core.ReasonMaxSteps,
				err: core.UnknownError(core.RefMaxSteps, fmt.Sprintf("run stopped after %d steps", e.cfg.MaxSteps))}, true
		}
		history, parentID, err := r.history(ctx)
		if err != nil {
			return r.cancelled(ctx, err)
		}
		if err := r.startStep(ctx, parentID); err != nil {
			return r.cancelled(ctx, err)
		}
		req := llm.Request{Model: modelName, Messages: history, Tools: toolSpecs(e.tools)}
		if o, done := r.callWithRetry(ctx, provider, req); done {
			if o.state == "" {
				return r.cancelled(ctx, ctx.Err())
			}
			return o, true
		}
		if len(r.step.calls) > 0 {
			if o, done := r.runTools(ctx); done {
				if o.state == "" {
					return r.cancelled(ctx, ctx.Err())
				}
				return o, true
			}
			continue
		}
		// The model is done. A message steered into the run after this
		// step began is caught by finish, which sends the loop round again.
		return succeeded, true
	}
}

var errAlreadyEnded = errors.New("run already ended")

// cancelled decides what a failure in the loop means: an abort, a
// shutdown, or an internal error.
func (r *runner) cancelled(ctx context.Context, err error) (outcome, bool) {
	cause := context.Cause(ctx)
	var ab *abortCause
	if errors.As(cause, &ab) {
		return outcome{state: core.RunInterrupted, reason: ab.reason,
			err: core.AbortedError("The operation was aborted.")}, true
	}
	if errors.Is(cause, errShutdown) {
		return outcome{}, false
	}
	if err == nil {
		err = cause
	}
	if err == nil {
		err = errors.New("run stopped without a cause")
	}
	r.e.log.Error("run failed", "run", r.run.ID, "err", err)
	return outcome{state: core.RunFailed, reason: core.ReasonInternal, err: core.UnknownError(core.RefInternal, err.Error())}, true
}

// begin marks the run running.
func (r *runner) begin(ctx context.Context) error {
	return r.e.st.Tx(ctx, func(tx store.Tx) error {
		run, err := tx.Run(ctx, r.run.ID)
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
		run.State = core.RunRunning
		if run.Time.Started == 0 {
			run.Time.Started = r.e.now()
		}
		r.run = run
		w := writer{ctx: ctx, tx: tx}
		w.run(run)
		return w.err
	})
}

// history turns the session's transcript into the model's conversation and
// returns the id of the user message the next step answers.
//
// Messages before the run's first user message cannot change while the run
// executes, so they are read and converted once; each step reads only the
// run's own part of the transcript.
func (r *runner) history(ctx context.Context) ([]llm.Message, string, error) {
	if r.prefix == nil {
		prefix, err := r.e.history.prefix(ctx, r.e.st, r.run, r.convert)
		if err != nil {
			return nil, "", err
		}
		r.prefix = prefix
	}
	msgs, err := r.e.st.Messages(ctx, r.run.SessionID, store.MessageQuery{Since: r.run.UserMessageID})
	if err != nil {
		return nil, "", err
	}
	out, parent := r.convert(msgs, append([]llm.Message(nil), r.prefix...))
	if parent == "" {
		parent = r.run.UserMessageID
	}
	return out, parent, nil
}

// convert appends the model's view of msgs to out and returns the id of the
// latest user message of this run among them.
func (r *runner) convert(msgs []core.MessageWithParts, out []llm.Message) ([]llm.Message, string) {
	parent := ""
	for _, m := range msgs {
		if m.Info.Role == core.RoleUser {
			if m.Info.RunID == r.run.ID {
				parent = m.Info.ID
			}
			var c []llm.Content
			for _, p := range m.Parts {
				switch p.Type {
				case core.PartText:
					c = append(c, llm.Content{Type: llm.ContentText, Text: p.Text})
				case core.PartFile:
					c = append(c, llm.Content{Type: llm.ContentText, Text: fmt.Sprintf("[attached file %s (%s): %s]", p.Filename, p.Mime, p.URL)})
				}
			}
			if len(c) > 0 {
				out = append(out, llm.Message{Role: llm.RoleUser, Content: c})
			}
			continue
		}
		// An assistant message whose stream broke and was retried is shown
		// to people but not replayed to the model.
		if m.Info.Error.Ref() == core.RefStreamRetried {
			continue
		}
		var asst, results []llm.Content
		for _, p := range m.Parts {
			switch p.Type {
			case core.PartText:
				if p.Text != "" {
					asst = append(asst, llm.Content{Type: llm.ContentText, Text: p.Text})
				}
			case core.PartTool:
				asst = append(asst, llm.Content{Type: llm.ContentToolCall, CallID: p.CallID, Name: p.Tool, Input: p.State.Input})
				switch p.State.Status {
				case core.ToolCompleted:
					results = append(results, llm.Content{Type: llm.ContentToolResult, CallID: p.CallID, Text: p.State.Output})
				case core.ToolError:
					results = append(results, llm.Content{Type: llm.ContentToolResult, CallID: p.CallID, Text: p.State.Error, IsError: true})
				default:
					// Every tool call must have a result before the model
					// is called again.
					results = append(results, llm.Content{Type: llm.ContentToolResult, CallID: p.CallID, Text: "tool call did not complete", IsError: true})
				}
			}
		}
		if len(asst) > 0 {
			out = append(out, llm.Message{Role: llm.RoleAssistant, Content: asst})
		}
		if len(results) > 0 {
			out = append(out, llm.Message{Role: llm.RoleUser, Content: results})
		}
	}
	return out, parent
}

func toolSpecs(reg *tool.Registry) []llm.ToolSpec {
	var out []llm.ToolSpec
	for _, t := range reg.All() {
		out = append(out, llm.ToolSpec{Name: t.Name(), Description: t.Description(), Schema: t.Schema()})
	}
	return out
}

// startStep creates the step's assistant message with its step-start part.
func (r *runner) startStep(ctx context.Context, parentID string) error {
	now := r.e.now()
	sess, err := r.e.st.Session(ctx, r.run.SessionID)
	if err != nil {
		return err
	}
	msg := assistantMessage(r.run, sess, parentID, now)
	r.step = &step{msg: msg, lastFlush: time.Now()}
	return r.e.st.Tx(ctx, func(tx store.Tx) error {
		w := writer{ctx: ctx, tx: tx}
		w.message(msg)
		w.part(core.Part{ID: core.NewID(core.PrefixPart, false), SessionID: msg.SessionID, MessageID: msg.ID, Type: core.PartStepStart})
		run := r.run
		run.Steps++
		if run.Phase == core.PhaseRecovering {
			// The first new step after a restart ends recovery; the status
			// changes from busy/recovering to busy.
			run.Phase = ""
			w.status(run.SessionID, core.StatusOf(&run, nil))
		}
		w.run(run)
		if w.err == nil {
			r.run = run
		}
		return w.err
	})
}

// unfinishedStep returns the run's last step when it still has tool calls
// that never ran (they were waiting for a permission when the server
// stopped).
func (r *runner) unfinishedStep(ctx context.Context) (*step, error) {
	if r.step != nil {
		return nil, nil
	}
	infos, err := r.e.st.RunMessages(ctx, r.run.ID)
	if err != nil {
		return nil, err
	}
	for i := len(infos) - 1; i >= 0; i-- {
		if infos[i].Role != core.RoleAssistant {
			continue
		}
		m, err := r.e.st.Message(ctx, r.run.SessionID, infos[i].ID)
		if err != nil {
			return nil, err
		}
		s := &step{msg: m.Info}
		open := false
		for j := range m.Parts {
			if m.Parts[j].Type == core.PartTool {
				p := m.Parts[j]
				s.calls = append(s.calls, &p)
				open = open || p.State.Status == core.ToolPending
			}
		}
		if !open {
			return nil, nil
		}
		return s, nil
	}
	return nil, nil
}

// callWithRetry makes the model call, retrying retryable failures within
// the budget. done is true when the run must end (o.state empty means the
// context was cancelled).
func (r *runner) callWithRetry(ctx context.Context, p llm.Provider, req llm.Request) (o outcome, done bool) {
	e := r.e
	first := time.Now()
	for attempt := 1; ; attempt++ {
		req.Attempt = attempt
		err := r.callOnce(ctx, p, req)
		if err == nil {
			if ferr := r.endStep(ctx, nil); ferr != nil {
				return outcome{}, true
			}
			return outcome{}, false
		}
		if ctx.Err() != nil {
			return outcome{}, true
		}
		var apiErr *llm.APIError
		if !errors.As(err, &apiErr) {
			apiErr = &llm.APIError{Message: err.Error(), Retryable: false}
		}
		cerr := apiError(apiErr, r.run.Model.ProviderID)
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
	return r.e.st.Tx(ctx, func(tx store.Tx) error {
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
			return r.delta(ctx, ev.Kind, ev.Text)
		case llm.EventToolCall:
			if err := r.closeText(ctx); err != nil {
				return err
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
	created := false
	if *pp == nil {
		*pp = &core.Part{ID: core.NewID(core.PrefixPart, false), SessionID: s.msg.SessionID, MessageID: s.msg.ID,
			Type: typ, Time: core.PartTime{Start: r.e.now()}}
		created = true
	}
	p := *pp
	p.Text += text
	r.e.hub.PublishLive(core.MustEvent(p.SessionID, core.EventPartDelta, core.DeltaProps{
		SessionID: p.SessionID, MessageID: p.MessageID, PartID: p.ID, Field: "text", Delta: text}))
	if created || time.Since(s.lastFlush) >= r.e.cfg.FlushInterval {
		return r.flushParts(ctx, false)
	}
	return nil
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
	return r.e.st.Tx(ctx, func(tx store.Tx) error {
		w := writer{ctx: ctx, tx: tx}
		for _, p := range []*core.Part{s.reasoning, s.text} {
			if p == nil {
				continue
			}
			if end && p.Time.End == 0 {
				p.Time.End = now
			}
			w.part(*p)
		}
		return w.err
	})
}

func (r *runner) closeText(ctx context.Context) error {
	if err := r.flushParts(ctx, true); err != nil {
		return err
	}
	r.step.text, r.step.reasoning = nil, nil
	return nil
}

// endStep closes the step: final text, step-finish, and the assistant
// message's accounting (and error, when the step failed).
func (r *runner) endStep(ctx context.Context, failure *core.Error) error {
	s := r.step
	now := r.e.now()
	tokens := core.Tokens{Input: s.usage.Input, Output: s.usage.Output, Reasoning: s.usage.Reasoning,
		Cache: core.CacheTokens{Read: s.usage.CacheRead, Write: s.usage.CacheWrite}}
	wctx, cancel := detached(ctx)
	defer cancel()
	err := r.e.st.Tx(wctx, func(tx store.Tx) error {
		w := writer{ctx: wctx, tx: tx}
		for _, p := range []*core.Part{s.reasoning, s.text} {
			if p != nil {
				if p.Time.End == 0 {
					p.Time.End = now
				}
				w.part(*p)
			}
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
			w.part(*p)
		}
		w.part(core.Part{ID: core.NewID(core.PrefixPart, false), SessionID: s.msg.SessionID, MessageID: s.msg.ID,
			Type: core.PartStepFinish, Reason: finish, Tokens: tokens})
		if failure == nil && r.run.Resumes > 0 {
			// A completed step proves the run is not crash-looping.
			run := r.run
			run.Resumes = 0
			w.run(run)
			if w.err == nil {
				r.run = run
			}
		}
		s.msg.Tokens = s.msg.Tokens.Add(tokens)
		s.msg.Finish = finish
		s.msg.Completed = now
		if failure != nil {
			s.msg.Error = failure
		}
		w.message(s.msg)
		return w.err
	})
	s.text, s.reasoning = nil, nil
	return err
}

// runTools executes the step's tool calls in order. Each call is recorded
// as running before it executes, so a crash can never replay it silently.
func (r *runner) runTools(ctx context.Context) (outcome, bool) {
	e := r.e
	sess, err := e.st.Session(ctx, r.run.SessionID)
	if err != nil {
		return outcome{}, true
	}
	for _, p := range r.step.calls {
		if p.State.Status != core.ToolPending {
			continue // done before a restart
		}
		t, ok := e.tools.Get(p.Tool)
		call := tool.Call{SessionID: p.SessionID, MessageID: p.MessageID, CallID: p.CallID, Directory: sess.Directory, Input: p.State.Input}
		var refused *tool.Result
		if ok {
			refused, err = r.authorize(ctx, sess, p, t, &call)
			if err != nil {
				return outcome{}, true
			}
		}
		p.State = core.ToolState{Status: core.ToolRunning, Input: p.State.Input, Time: core.PartTime{Start: e.now()}}
		if err := r.putPart(ctx, *p); err != nil {
			return outcome{}, true
		}
		var res tool.Result
		switch {
		case !ok:
			res = tool.Errorf(fmt.Sprintf("unknown tool %q", p.Tool))
		case refused != nil:
			res = *refused
		default:
			res, err = t.Run(ctx, call)
			if ctx.Err() != nil {
				return outcome{}, true
			}
			if err != nil {
				res = tool.Errorf("internal error: " + err.Error())
				p.State = toolEnd(p.State, res, e.now())
				_ = r.putPart(ctx, *p)
				return outcome{state: core.RunFailed, reason: core.ReasonInternal, err: core.UnknownError(core.RefInternal, fmt.Sprintf("tool %s: %v", p.Tool, err))}, true
			}
		}
		p.State = toolEnd(p.State, res, e.now())
		if err := r.putPart(ctx, *p); err != nil {
			return outcome{}, true
		}
	}
	return outcome{}, false
}

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
	return r.e.st.Tx(ctx, func(tx store.Tx) error {
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
	if err := r.flushParts(wctx, false); err != nil {
		r.e.log.Warn("flush on shutdown", "run", r.run.ID, "err", err)
	}
}
