package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/tool"
)

// The user's own shell command (opencode's shell mode, `!cmd` in its TUI)
// is a run like a prompt's, with an outcome and events, whose one step
// runs the command through the bash tool instead of calling the model: a
// user message that says so, and an assistant message holding the bash
// call with its streamed output. The user typed it, so nothing asks; the
// operator's deny rules still apply. The call's process group, its
// container and abort work as for the model's calls.

// ShellIntro is the text of a shell run's user message, as opencode
// writes it.
const ShellIntro = "The following tool was executed by the user"

// Shell admits a shell command as a run of the session (see PromptInput's
// Shell): ErrSessionBusy while the session runs.
func (e *Engine) Shell(ctx context.Context, sessionID string, in PromptInput) (Admission, error) {
	if in.Shell == "" {
		return Admission{}, &InputError{"command: required"}
	}
	if len(in.Shell) > 64<<10 {
		return Admission{}, &InputError{fmt.Sprintf("command: %d bytes is over the limit of %d bytes", len(in.Shell), 64<<10)}
	}
	in.Parts = []InputPart{{Type: core.PartText, Text: ShellIntro, Synthetic: true}}
	in.Policy, in.NoReply, in.Compact = core.PolicyReject, false, false
	return e.Prompt(ctx, sessionID, in)
}

// shellRun executes a shell run's command.
func (r *runner) shellRun(ctx context.Context) (outcome, bool) {
	e := r.e
	// Resumed after a crash: the command ran (or its fate is unknown and
	// recovery said so on its part); it never runs twice.
	if _, err := e.st.LastRunMessage(ctx, r.run.ID, core.RoleAssistant); err == nil {
		return succeeded, true
	} else if !errors.Is(err, store.ErrNotFound) {
		return r.cancelled(ctx, err)
	}
	sess, err := e.st.Session(ctx, r.run.SessionID)
	if err != nil {
		return r.cancelled(ctx, err)
	}
	if err := r.openStep(ctx, assistantMessage(r.run, sess, r.run.UserMessageID, e.now()), nil); err != nil {
		return r.cancelled(ctx, err)
	}
	input, _ := json.Marshal(map[string]string{"command": r.run.Shell, "description": r.run.Shell})
	p := &core.Part{ID: core.NewID(core.PrefixPart, false), SessionID: sess.ID, MessageID: r.step.msg.ID, Type: core.PartTool,
		CallID: "shell_" + r.run.ID, Tool: "bash",
		State: core.ToolState{Status: core.ToolRunning, Input: input, Time: core.PartTime{Start: e.now()}}}
	r.step.calls = []*core.Part{p}
	t, ok := e.tool("bash")
	if !ok {
		return outcome{state: core.RunFailed, reason: core.ReasonInternal, err: core.UnknownError(core.RefInternal, "no bash tool")}, true
	}
	call := tool.Call{ID: p.ID, Scope: e.cfg.ToolScope, SessionID: sess.ID, MessageID: p.MessageID, CallID: p.CallID,
		Directory: sess.Directory, Input: input, ReadDirs: []string{filepath.Join(e.cfg.OutputDir, sess.ID)}, Env: e.cfg.ToolEnv, Sandbox: e.cfg.Sandbox}
	refused := r.denied(t, call)
	// Recorded as running before it executes: a crash never runs it twice.
	if err := r.putPart(ctx, *p); err != nil {
		return r.cancelled(ctx, err)
	}
	if refused == nil {
		r.beforeChange(ctx, t)
	}
	if o, done := r.execTool(ctx, t, call, p, refused); done {
		return r.settle(ctx, o)
	}
	s := r.step
	now := e.now()
	s.msg.Completed, s.msg.Finish = now, "stop"
	finish := core.Part{ID: core.NewID(core.PrefixPart, false), SessionID: sess.ID, MessageID: s.msg.ID,
		Type: core.PartStepFinish, Reason: "stop"}
	s.finishPart = &finish
	msg := s.msg
	r.later(func(w *writer) { w.message(msg) })
	r.finishStep(ctx)
	return succeeded, true
}

// denied is the refusal of a user's shell command by the operator's deny
// rules, or nil: what would ask is allowed, since the user typed it.
func (r *runner) denied(t tool.Tool, call tool.Call) *tool.Result {
	pt, ok := t.(tool.Permissioned)
	if !ok {
		return nil
	}
	for _, need := range pt.Needs(call) {
		need.Ask = false
		if need.Decide(r.operatorRules(), nil, nil) == core.ActionDeny {
			res := tool.Errorf(fmt.Sprintf("permission denied by rule: %s %v", need.Permission, need.Patterns))
			return &res
		}
	}
	return nil
}
