package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

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
			r.beforeChange(ctx, t)
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
		if refused == nil {
			r.beforeChange(ctx, t)
		}
		if o, done := r.execTool(ctx, t, call, p, refused); done {
			wait()
			return o, true
		}
	}
	return wait()
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
