package engine

import (
	"context"
	"errors"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/llm"
)

// Tracing: a run is a trace of its own (it outlives the request that
// admitted it, and may be resumed by another process), linked to the
// admitting request's span. Its steps are children of the run's span; a
// step's model call and tool calls are children of the step's.

// maxAdmissionLinks bounds the admitting spans kept for runs not yet
// started here (a run another node executes is never taken from the map).
const maxAdmissionLinks = 4096

// admitted remembers the span of the request that admitted a run, for the
// run's span to link to.
func (e *Engine) admitted(ctx context.Context, runID string) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || runID == "" {
		return
	}
	e.mu.Lock()
	if e.admissions == nil {
		e.admissions = make(map[string]trace.SpanContext)
	}
	if len(e.admissions) < maxAdmissionLinks {
		e.admissions[runID] = sc
	}
	e.mu.Unlock()
}

// runSpan starts the span of one execution of a run.
func (e *Engine) runSpan(ctx context.Context, run core.Run) (context.Context, trace.Span) {
	e.mu.Lock()
	sc, ok := e.admissions[run.ID]
	delete(e.admissions, run.ID)
	e.mu.Unlock()
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			attribute.String("agentd.run.id", run.ID),
			attribute.String("agentd.session.id", run.SessionID),
			attribute.String("agentd.agent", run.Agent),
			attribute.Int("agentd.run.resumes", run.Resumes),
			attribute.String("gen_ai.provider.name", run.Model.ProviderID),
			attribute.String("gen_ai.request.model", run.Model.ModelID),
		)}
	if ok {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc,
			Attributes: []attribute.KeyValue{attribute.String("agentd.link", "admitted by")}}))
	}
	return e.cfg.Tracer.Start(ctx, "run", opts...)
}

// endRunSpan records how the run ended (when this execution ended it).
func endRunSpan(span trace.Span, o outcome, steps int) {
	span.SetAttributes(attribute.String("agentd.run.outcome", string(o.state)), attribute.Int("agentd.run.steps", steps))
	if o.reason != "" {
		span.SetAttributes(attribute.String("agentd.run.reason", string(o.reason)))
	}
	if o.state == core.RunFailed && o.err != nil {
		span.SetStatus(codes.Error, o.err.Data.Message)
	}
}

// beginStepSpan starts the span of the step the runner just opened. A
// step's span covers its model call and the tool calls the model asked
// for; it ends when the next step starts or the run's execution ends.
func (r *runner) beginStepSpan(ctx context.Context) {
	r.endStepSpan()
	_, r.stepSpan = r.e.cfg.Tracer.Start(ctx, "step", trace.WithAttributes(
		attribute.Int("agentd.step", r.run.Steps), attribute.String("agentd.message.id", r.step.msg.ID)))
}

// endStepSpan ends the current step's span, if any.
func (r *runner) endStepSpan() {
	if r.stepSpan == nil {
		return
	}
	r.stepSpan.End()
	r.stepSpan = nil
}

// inStep returns ctx carrying the current step's span, so that the spans
// of its model and tool calls are the step's children.
func (r *runner) inStep(ctx context.Context) context.Context {
	if r.stepSpan == nil {
		return ctx
	}
	return trace.ContextWithSpan(ctx, r.stepSpan)
}

// modelCall makes one model call, timed and traced.
func (r *runner) modelCall(ctx context.Context, p llm.Provider, req llm.Request) error {
	provider, model := r.run.Model.ProviderID, r.run.Model.ModelID
	ctx, span := r.e.cfg.Tracer.Start(r.inStep(ctx), "chat "+model, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("gen_ai.operation.name", "chat"),
			attribute.String("gen_ai.provider.name", provider), attribute.String("gen_ai.request.model", model),
			attribute.Int("agentd.attempt", req.Attempt)))
	defer span.End()
	start := time.Now()
	err := r.callOnce(ctx, p, req)
	status := "ok"
	var apiErr *llm.APIError
	var werr *writeError
	switch {
	case err == nil:
		u := r.step.usage
		span.SetAttributes(attribute.Int64("gen_ai.usage.input_tokens", u.Input),
			attribute.Int64("gen_ai.usage.output_tokens", u.Output))
		if r.step.finish != "" {
			span.SetAttributes(attribute.StringSlice("gen_ai.response.finish_reasons", []string{r.step.finish}))
		}
	case ctx.Err() != nil:
		status = "canceled"
	case errors.As(err, &werr):
		// agentd's own failure, not the provider's: not counted as a call
		// that failed.
		span.SetStatus(codes.Error, err.Error())
		return err
	case errors.As(err, &apiErr) && apiErr.StatusCode != 0:
		status = strconv.Itoa(apiErr.StatusCode)
	default:
		status = "error"
	}
	if err != nil && status != "canceled" {
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(attribute.String("error.type", status))
	}
	r.e.cfg.Metrics.ModelCall(provider, model, status, time.Since(start))
	return err
}

// toolSpan starts the span of one tool call.
func (r *runner) toolSpan(ctx context.Context, name, callID string) (context.Context, trace.Span) {
	return r.e.cfg.Tracer.Start(r.inStep(ctx), "execute_tool "+name, trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "execute_tool"),
		attribute.String("gen_ai.tool.name", name), attribute.String("gen_ai.tool.call.id", callID)))
}
