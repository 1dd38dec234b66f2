package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/agentd/agentd/internal/asks"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/tool"
	"go.opentelemetry.io/otel/codes"
)

// runTools executes the step's tool calls in order. Each call is recorded
// as running before it executes, so a crash can never replay it silently.
// Task calls (subagents) run at the same time as the calls after them, at
// most maxParallelTasks at once; a task call cut off while it waited for
// its child is taken up again (it waits for the same child).
func (r *runner) runTools(ctx context.Context) (outcome, bool) {
	sess, err := r.e.st.Session(ctx, r.run.SessionID)
	if err != nil {
		return outcome{}, true
	}
	tasks := &taskGroup{slots: make(chan struct{}, maxParallelTasks)}
	for _, p := range r.step.calls {
		_, resumed := childOf(*p)
		resumed = resumed && p.State.Status == core.ToolRunning
		if !notStarted(*p) && !resumed {
			continue // done before a restart
		}
		if p.Tool == StructuredOutputTool && r.structured != nil {
			if o, done := r.structuredCall(ctx, p); done {
				tasks.wait()
				return o, true
			}
			continue
		}
		if o, done := r.runCall(ctx, sess, p, resumed, tasks); done {
			tasks.wait()
			return o, true
		}
	}
	return tasks.wait()
}

// runCall gates one call (the agent's tools, permissions, a question's
// answer), records it running and executes it, a task call in the
// background.
func (r *runner) runCall(ctx context.Context, sess core.Session, p *core.Part, resumed bool, tasks *taskGroup) (outcome, bool) {
	e := r.e
	t, ok := e.tool(p.Tool)
	ok = ok && (r.agent.Name == "" || r.toolAllowed(p.Tool))
	call := tool.Call{ID: p.ID, Scope: e.cfg.ToolScope, SessionID: p.SessionID, MessageID: p.MessageID, CallID: p.CallID, Agent: r.agent.Name,
		Directory: sess.Directory, Input: p.State.Input, ReadDirs: []string{filepath.Join(e.cfg.OutputDir, p.SessionID)}, Env: e.cfg.ToolEnv, Sandbox: e.cfg.Sandbox,
		Todos: func(ctx context.Context) ([]core.Todo, error) { return e.st.Todos(ctx, sess.ID) }}
	call.Ask = r.askFor(sess, p)
	var refused *tool.Result
	var rej *rejectedError
	if ok && p.State.Status == core.ToolPending { // tool.execute.before, once: its arguments are recorded below
		refused = e.cfg.Hooks.ToolBefore(ctx, p.Tool, &call)
		p.State.Input = call.Input
	}
	if !ok {
		res := tool.Errorf(fmt.Sprintf("unknown tool %q: the tools offered are listed in the request", p.Tool))
		refused = &res
	} else if !resumed && refused == nil {
		var err error
		if refused, err = r.gate(ctx, sess, p, t, &call); errors.As(err, &rej) {
			refused = &rej.res
		} else if err != nil {
			return outcome{}, true
		}
	}
	if !resumed {
		p.State = core.ToolState{Status: core.ToolRunning, Input: p.State.Input, Time: core.PartTime{Start: e.now()}}
		if err := r.putPart(ctx, *p); err != nil {
			return outcome{}, true
		}
	}
	if refused == nil {
		r.beforeChange(ctx, t)
	}
	if refused == nil && p.Tool == TaskToolName {
		tasks.start(ctx, func() (outcome, bool) { return r.execTool(ctx, t, call, p, nil) })
		return outcome{}, false
	}
	o, done := r.execTool(ctx, t, call, p, refused)
	if rej != nil && !done {
		// The user said no: the turn ends with the call's error.
		return outcome{state: core.RunInterrupted, reason: cmp.Or(rej.reason, core.ReasonRejected)}, true
	}
	return o, done
}

// gate decides whether a call runs: its permissions, and for a question
// the user's answer, which is the call's result instead of running it.
// A non-nil result is what the model sees instead of the call's.
func (r *runner) gate(ctx context.Context, sess core.Session, p *core.Part, t tool.Tool, call *tool.Call) (*tool.Result, error) {
	refused, err := r.authorize(ctx, sess, p, t, call)
	if err != nil || refused != nil || p.Tool != asks.QuestionToolName {
		return refused, err
	}
	res, err := r.askQuestion(ctx, p)
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// taskGroup runs a step's task calls in the background, a few at a time.
type taskGroup struct {
	slots chan struct{}
	ended []chan taskEnd
}

type taskEnd struct {
	o    outcome
	done bool
}

func (g *taskGroup) start(ctx context.Context, run func() (outcome, bool)) {
	ch := make(chan taskEnd, 1)
	g.ended = append(g.ended, ch)
	go func() {
		select {
		case g.slots <- struct{}{}:
			defer func() { <-g.slots }()
		case <-ctx.Done():
			ch <- taskEnd{done: true}
			return
		}
		o, done := run()
		ch <- taskEnd{o, done}
	}()
}

// wait waits for every task started and returns the first that ended the
// run, if any.
func (g *taskGroup) wait() (outcome, bool) {
	var first taskEnd
	for _, ch := range g.ended {
		if x := <-ch; x.done && !first.done {
			first = x
		}
	}
	g.ended = nil
	return first.o, first.done
}

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
		e.cfg.Hooks.ToolAfter(ctx, p.Tool, call, &res)
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

func toolEnd(st core.ToolState, res tool.Result, now int64) core.ToolState {
	out := core.ToolState{Input: st.Input, Title: res.Title, Metadata: res.Metadata, Time: core.PartTime{Start: st.Time.Start, End: now}}
	if res.IsError {
		out.Status, out.Error = core.ToolError, res.Output
	} else {
		out.Status, out.Output = core.ToolCompleted, res.Output
	}
	return out
}
