package engine

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/store"
)

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
		if e.retriesExhausted(apiErr, attempt, time.Since(first)+delay) {
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

// retriesExhausted reports whether another try, started after elapsed,
// is past the budget: the engine's (attempts, time) or the error's own
// (a refused connection gets a few quick tries only).
func (e *Engine) retriesExhausted(apiErr *llm.APIError, attempt int, elapsed time.Duration) bool {
	if apiErr.MaxAttempts > 0 && attempt >= apiErr.MaxAttempts {
		return true
	}
	return attempt >= e.cfg.Retry.MaxAttempts || elapsed > e.cfg.Retry.MaxElapsed
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
	err := r.setState(ctx, func(run *core.Run) error {
		run.Attempt, run.RetryMessage, run.NextRetry = attempt, msg, next
		return run.Apply(core.OnRetryWait)
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
	return r.setState(ctx, func(run *core.Run) error {
		run.Attempt, run.RetryMessage, run.NextRetry = 0, "", 0
		return run.Apply(core.OnRetry)
	})
}

// setState changes the run and publishes the session status it implies,
// in one transaction.
func (r *runner) setState(ctx context.Context, change func(*core.Run) error) error {
	return r.tx(ctx, func(tx store.Tx) error {
		run := r.run
		if err := change(&run); err != nil {
			return err
		}
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
