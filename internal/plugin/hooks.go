package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"slices"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/tool"
)

// Hooks is what the engine calls at opencode's call points. Every method
// is bounded by the hook timeout and returns at once when no plugin
// defines the hook. What a hook changes is written by the engine where it
// writes what was changed (the prompt's parts at admission, a call's
// arguments in its running state, its output with its result), so a
// resumed run never asks a plugin again about a step it recorded.
type Hooks interface {
	// ChatMessage is chat.message, at admission: parts points to the
	// prompt's parts (any slice whose JSON is opencode's part shape),
	// changed in place.
	ChatMessage(ctx context.Context, in ChatInput, parts any) error
	// Request is what opencode calls before each model call of a step:
	// tool.definition for each tool, experimental.chat.system.transform,
	// chat.params and chat.headers, in one round trip, after
	// experimental.chat.messages.transform (the history, sent as a change);
	// for a compaction's summary (llm.PurposeSummary) first
	// experimental.session.compacting instead; for a title
	// (llm.PurposeTitle, agent "title") the batch alone.
	Request(ctx context.Context, in StepInput, req *llm.Request) error
	// ToolBefore is tool.execute.before (the call's arguments) and, for
	// bash, shell.env (variables added to call.Env), before the call's
	// permissions are decided; a non-nil result is the call's refusal.
	ToolBefore(ctx context.Context, name string, call *tool.Call) *tool.Result
	// ToolAfter is tool.execute.after: the result's title, output and
	// metadata; a failed hook fails the call with its reason.
	ToolAfter(ctx context.Context, name string, call tool.Call, res *tool.Result)
	// Permission is permission.ask: what the rules decided in, the
	// plugins' decision out; a deny stays a deny, without asking them.
	Permission(ctx context.Context, dir string, p core.Part, need tool.Need, action string) (string, error)
	// Turns are the hooks of a turn's course (turns.go).
	Turns
}

// ChatInput is chat.message's input.
type ChatInput struct {
	SessionID string
	Directory string
	MessageID string
	Agent     string
	Model     core.ModelRef
	Variant   string
}

// StepInput names the step a request is for.
type StepInput struct {
	SessionID string
	Directory string
	MessageID string // the user message the step answers
	Agent     string
	Model     core.ModelRef
	// Allowed says whether the run's agent offers a tool (nil: all).
	Allowed func(name string) bool
}

// None is the Hooks of a node without plugins: every call returns at once.
type None struct{}

// ChatMessage implements Hooks.
func (None) ChatMessage(context.Context, ChatInput, any) error { return nil }

// Request implements Hooks.
func (None) Request(context.Context, StepInput, *llm.Request) error { return nil }

// ToolBefore implements Hooks.
func (None) ToolBefore(context.Context, string, *tool.Call) *tool.Result { return nil }

// ToolAfter implements Hooks.
func (None) ToolAfter(context.Context, string, tool.Call, *tool.Result) {}

// Permission implements Hooks.
func (None) Permission(_ context.Context, _ string, _ core.Part, _ tool.Need, action string) (string, error) {
	return action, nil
}

var _ Hooks = (*Host)(nil)

func modelJSON(m core.ModelRef) map[string]any {
	return map[string]any{"id": m.ModelID, "providerID": m.ProviderID, "name": m.ModelID}
}

// ChatMessage implements Hooks.
func (h *Host) ChatMessage(ctx context.Context, in ChatInput, parts any) error {
	input := map[string]any{"sessionID": in.SessionID, "agent": in.Agent, "messageID": in.MessageID,
		"model": map[string]any{"providerID": in.Model.ProviderID, "modelID": in.Model.ModelID}, "variant": in.Variant}
	msg := map[string]any{"id": in.MessageID, "sessionID": in.SessionID, "role": "user", "agent": in.Agent,
		"model": input["model"]}
	var out struct {
		Parts json.RawMessage `json:"parts"`
	}
	b, err := json.Marshal(parts)
	if err != nil {
		return err
	}
	if string(b) == "null" {
		b = []byte("[]") // a prompt without parts (a compaction's): plugins expect an array
	}
	if err := h.hook(ctx, in.Directory, in.SessionID, "chat.message", input,
		map[string]any{"message": msg, "parts": json.RawMessage(b)}, &out); err != nil || out.Parts == nil || bytes.Equal(out.Parts, b) {
		return err
	}
	return json.Unmarshal(out.Parts, parts)
}

// hookCall is one trigger of a batch.
type hookCall struct {
	Name   string `json:"name"`
	Input  any    `json:"input"`
	Output any    `json:"output"`
}

// Request implements Hooks.
func (h *Host) Request(ctx context.Context, in StepInput, req *llm.Request) error {
	req.Directory = in.Directory // for a plugin's auth loader (auth.go)
	p, err := h.current(ctx)
	if err != nil {
		return err
	}
	m, err := h.instance(ctx, p, in.Directory)
	if err != nil {
		return err
	}
	if err := h.before(ctx, p, m, in, req); err != nil {
		return err
	}
	var calls []hookCall
	model := modelJSON(in.Model)
	if m.hooks["tool.definition"] {
		for _, t := range req.Tools {
			calls = append(calls, hookCall{"tool.definition", map[string]any{"toolID": t.Name},
				map[string]any{"description": t.Description, "parameters": t.Schema}})
		}
	}
	if m.hooks["experimental.chat.system.transform"] {
		calls = append(calls, hookCall{"experimental.chat.system.transform",
			map[string]any{"sessionID": in.SessionID, "model": model}, map[string]any{"system": req.System}})
	}
	chat := map[string]any{"sessionID": in.SessionID, "agent": in.Agent, "model": model,
		"provider": map[string]any{"source": "config", "info": map[string]any{"id": in.Model.ProviderID}, "options": map[string]any{}},
		"message":  map[string]any{"id": in.MessageID, "sessionID": in.SessionID, "role": "user"}}
	if m.hooks["chat.params"] {
		calls = append(calls, hookCall{"chat.params", chat, map[string]any{"temperature": req.Temperature, "topP": req.TopP,
			"topK": req.Options["topK"], "maxOutputTokens": nonZero(req.MaxTokens), "options": orEmpty(req.Options)}})
	}
	if m.hooks["chat.headers"] {
		calls = append(calls, hookCall{"chat.headers", chat, map[string]any{"headers": orEmptyS(req.Headers)}})
	}
	if len(calls) == 0 {
		return nil
	}
	outs := make([]json.RawMessage, len(calls))
	ptrs := make([]any, len(calls))
	for i := range outs {
		ptrs[i] = &outs[i]
	}
	if err := h.batch(ctx, p, in.Directory, in.SessionID, calls, ptrs); err != nil {
		return err
	}
	return applyRequest(req, calls, outs)
}

// before is what comes before the batch of a model call's hooks: the
// history's transform and the plugins' tools for a step, the compacting
// hook for a compaction's summary (which is asked without tools); nothing
// for a title (opencode asks it without tools, and its one message is no
// session's history).
func (h *Host) before(ctx context.Context, p *proc, m *made, in StepInput, req *llm.Request) error {
	switch req.Purpose {
	case llm.PurposeSummary:
		if m.hooks["experimental.session.compacting"] {
			return h.compacting(ctx, in, req)
		}
		return nil
	case llm.PurposeTitle:
		return nil
	}
	if m.hooks["experimental.chat.messages.transform"] {
		if err := h.transformMessages(ctx, p, in, req); err != nil {
			return err
		}
	}
	if len(m.tools) > 0 || m.hooks["tool.definition"] {
		req.Tools = slices.Clone(req.Tools) // the run's own list stays as set up
	}
	for _, d := range m.tools {
		known := slices.ContainsFunc(req.Tools, func(t llm.ToolSpec) bool { return t.Name == d.Name })
		if !known && (in.Allowed == nil || in.Allowed(d.Name)) {
			req.Tools = append(req.Tools, llm.ToolSpec{Name: d.Name, Description: d.Description, Schema: (&pluginTool{def: d}).Schema()})
		}
	}
	return nil
}

func nonZero(n int) any {
	if n == 0 {
		return nil
	}
	return n
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

func orEmptyS(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// applyRequest writes what the hooks changed back into the request.
func applyRequest(req *llm.Request, calls []hookCall, outs []json.RawMessage) error {
	tools := 0
	for i, c := range calls {
		switch c.Name {
		case "tool.definition":
			var o struct {
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			}
			if err := json.Unmarshal(outs[i], &o); err != nil {
				return &HookError{Message: "plugin hook tool.definition: " + err.Error()}
			}
			req.Tools[tools].Description = o.Description
			if len(o.Parameters) > 0 && string(o.Parameters) != "null" {
				req.Tools[tools].Schema = o.Parameters
			}
			tools++
		case "experimental.chat.system.transform":
			var o struct{ System []string }
			if err := json.Unmarshal(outs[i], &o); err != nil {
				return &HookError{Message: "plugin hook " + c.Name + ": " + err.Error()}
			}
			req.System = o.System
		case "chat.params":
			if err := applyParams(req, outs[i]); err != nil {
				return err
			}
		case "chat.headers":
			var o struct{ Headers map[string]string }
			if err := json.Unmarshal(outs[i], &o); err != nil {
				return &HookError{Message: "plugin hook chat.headers: " + err.Error()}
			}
			req.Headers = o.Headers
		}
	}
	return nil
}

func applyParams(req *llm.Request, out json.RawMessage) error {
	var o struct {
		Temperature     *float64       `json:"temperature"`
		TopP            *float64       `json:"topP"`
		TopK            *float64       `json:"topK"`
		MaxOutputTokens *int           `json:"maxOutputTokens"`
		Options         map[string]any `json:"options"`
	}
	if err := json.Unmarshal(out, &o); err != nil {
		return &HookError{Message: "plugin hook chat.params: " + err.Error()}
	}
	req.Temperature, req.TopP = o.Temperature, o.TopP
	if o.MaxOutputTokens != nil {
		req.MaxTokens = *o.MaxOutputTokens
	}
	req.Options = maps.Clone(o.Options)
	if o.TopK != nil {
		if req.Options == nil {
			req.Options = map[string]any{}
		}
		req.Options["topK"] = *o.TopK
	}
	return nil
}

// ToolBefore implements Hooks.
func (h *Host) ToolBefore(ctx context.Context, name string, call *tool.Call) *tool.Result {
	var calls []hookCall
	p, err := h.current(ctx)
	if err != nil {
		return refusal(err)
	}
	m, err := h.instance(ctx, p, call.Directory)
	if err != nil {
		return refusal(err)
	}
	before, shell := m.hooks["tool.execute.before"], m.hooks["shell.env"]
	var args any = map[string]any{}
	if len(call.Input) > 0 {
		args = json.RawMessage(call.Input)
	}
	if before {
		calls = append(calls, hookCall{"tool.execute.before", map[string]any{"tool": name, "sessionID": call.SessionID, "callID": call.CallID},
			map[string]any{"args": args}})
	}
	shell = shell && name == "bash"
	if shell {
		calls = append(calls, hookCall{"shell.env", map[string]any{"cwd": call.Directory, "sessionID": call.SessionID, "callID": call.CallID},
			map[string]any{"env": map[string]string{}}})
	}
	if len(calls) == 0 {
		return nil
	}
	var changed struct {
		Args json.RawMessage `json:"args"`
	}
	var env struct{ Env map[string]string }
	outs := []any{&changed, &env}
	if !before {
		outs = outs[1:]
	}
	if err := h.batch(ctx, p, call.Directory, call.SessionID, calls, outs[:len(calls)]); err != nil {
		return refusal(err)
	}
	if before {
		call.Input = changed.Args
	}
	if len(env.Env) > 0 {
		call.Env = call.Env.With(env.Env)
	}
	return nil
}

func refusal(err error) *tool.Result {
	res := tool.Errorf(err.Error())
	return &res
}

// defines reports whether the directory's plugins define the hook.
func (h *Host) defines(ctx context.Context, dir, name string) (bool, error) {
	_, ok, err := h.has(ctx, dir, name)
	return ok, err
}

// ToolAfter implements Hooks.
func (h *Host) ToolAfter(ctx context.Context, name string, call tool.Call, res *tool.Result) {
	if res.IsError {
		return // opencode calls it for calls that completed
	}
	if ok, err := h.defines(ctx, call.Directory, "tool.execute.after"); err != nil || !ok {
		if err != nil {
			*res = tool.Errorf(err.Error())
		}
		return
	}
	var args any = map[string]any{}
	if len(call.Input) > 0 {
		args = json.RawMessage(call.Input)
	}
	md := res.Metadata
	if md == nil {
		md = map[string]any{}
	}
	var out struct {
		Title    string         `json:"title"`
		Output   string         `json:"output"`
		Metadata map[string]any `json:"metadata"`
	}
	err := h.hook(ctx, call.Directory, call.SessionID, "tool.execute.after",
		map[string]any{"tool": name, "sessionID": call.SessionID, "callID": call.CallID, "args": args},
		map[string]any{"title": res.Title, "output": res.Output, "metadata": md}, &out)
	if err != nil {
		*res = tool.Errorf(err.Error())
		return
	}
	res.Title, res.Output, res.Metadata = out.Title, out.Output, out.Metadata
}

// Permission implements Hooks.
func (h *Host) Permission(ctx context.Context, dir string, p core.Part, need tool.Need, action string) (string, error) {
	if action == core.ActionDeny {
		return action, nil // the operator's word
	}
	in := map[string]any{"id": p.ID, "type": need.Permission, "permission": need.Permission, "pattern": need.Patterns,
		"patterns": need.Patterns, "always": need.Always, "sessionID": p.SessionID, "messageID": p.MessageID, "callID": p.CallID,
		"title": need.Title, "metadata": orEmpty(need.Metadata), "tool": map[string]any{"messageID": p.MessageID, "callID": p.CallID}}
	var out struct {
		Status string `json:"status"`
	}
	if err := h.hook(ctx, dir, p.SessionID, "permission.ask", in, map[string]any{"status": action}, &out); err != nil {
		return "", err
	}
	switch out.Status {
	case core.ActionAllow, core.ActionAsk, core.ActionDeny:
		return out.Status, nil
	}
	return action, nil
}
