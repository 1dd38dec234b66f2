package engine

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/metrics"
	"github.com/agentd/agentd/internal/store"
	"go.opentelemetry.io/otel/codes"
)

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
	// changes is set once the step calls a tool that may change files:
	// its end takes a snapshot.
	changes bool
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
		Snapshot: r.snap}
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
	if s.due(r.e.flushInterval()) {
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
		st.part.Metadata = core.ReasoningMetadata(sig)
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

// completeText is experimental.text.complete as the text part ends
// (opencode's text-end): the plugins' text is the part's final text.
func (r *runner) completeText(ctx context.Context, failed bool) {
	if st := r.step.text; st != nil && !failed {
		t := r.e.cfg.Hooks.TextComplete(ctx, r.dir, *st.part, st.buf.String())
		st.buf.Reset()
		st.buf.WriteString(t)
	}
}

func (r *runner) closeText(ctx context.Context) error {
	r.completeText(ctx, false)
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
	r.completeText(ctx, failure != nil)
	s := r.step
	now := r.e.now()
	tokens := core.Tokens{Input: s.usage.Input, Output: s.usage.Output, Reasoning: s.usage.Reasoning,
		Cache: core.CacheTokens{Read: s.usage.CacheRead, Write: s.usage.CacheWrite}}
	cost := r.model.Cost.Cost(s.usage)
	if in := s.usage.Input + s.usage.CacheRead + s.usage.CacheWrite; in > 0 {
		r.lastInput = in
	}
	finish := s.finish
	if failure != nil {
		finish = "error"
	} else if finish == "" {
		finish = "stop"
	}
	parts := s.closedParts(now, failure != nil)
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
	r.later(func(w *writer) {
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

// closedParts are the step's parts as it ends: streamed text and reasoning
// ended now, and the tool calls the model asked for (which will not run
// when the step failed).
func (s *step) closedParts(now int64, failed bool) []core.Part {
	var parts []core.Part
	for _, p := range s.open() {
		if p.Time.End == 0 {
			p.Time.End = now
		}
		parts = append(parts, *p)
	}
	for _, p := range s.calls {
		if p.State.Status != core.ToolPending {
			continue
		}
		if failed {
			p.State = core.ToolState{Status: core.ToolError, Input: p.State.Input, Error: "not run: the model call failed",
				Time: core.PartTime{Start: now, End: now}}
		}
		parts = append(parts, *p)
	}
	return parts
}

// putPart commits p now, with the pending writes: as one of them, so that
// a part they already hold (a tool call pending, now running) is stored
// once.
func (r *runner) putPart(ctx context.Context, p core.Part) error {
	r.later(func(w *writer) { w.part(p) })
	return r.tx(ctx, func(store.Tx) error { return nil })
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
