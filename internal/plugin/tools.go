package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/tool"
)

// Tools are the plugins' tools, offered to the model beside the built-in
// ones (opencode's tool hook). A run sees the tools of its directory's
// instance: each is a tool.Contextual whose description is empty where
// the directory's plugins do not define it.
func (h *Host) Tools() tool.Source { return h.tools }

type toolSource struct {
	h     *Host
	mu    sync.Mutex
	names map[string]*pluginTool
}

// Tools implements tool.Source: every tool some instance made so far
// offers, so that the engine finds a call's tool by name. Which of them a
// run is offered is the directory's instance's to say: DescribeFor, and
// Request, which adds those of a directory seen for the first time.
func (s *toolSource) Tools() []tool.Tool {
	p := s.h.running()
	if p == nil {
		return s.all()
	}
	p.mu.Lock()
	var defs []ToolDef
	for _, m := range p.known {
		select {
		case <-m.ready:
			if m.err == nil {
				defs = append(defs, m.tools...)
			}
		default:
		}
	}
	p.mu.Unlock()
	s.mu.Lock()
	if s.names == nil {
		s.names = map[string]*pluginTool{}
	}
	for _, d := range defs {
		if s.names[d.Name] == nil {
			s.names[d.Name] = &pluginTool{h: s.h, name: d.Name, def: d}
		}
	}
	s.mu.Unlock()
	return s.all()
}

func (s *toolSource) all() []tool.Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]tool.Tool, 0, len(s.names))
	for _, t := range s.names {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

// pluginTool is one tool of the plugins, run by the host.
type pluginTool struct {
	h    *Host
	name string
	def  ToolDef
}

func (t *pluginTool) Name() string { return t.name }

func (t *pluginTool) Description() string { return t.def.Description }

func (t *pluginTool) Schema() json.RawMessage {
	if len(t.def.Parameters) == 0 {
		return json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return t.def.Parameters
}

// DescribeFor implements tool.Contextual: the description of the
// directory's own definition, "" where its plugins do not define the tool.
func (t *pluginTool) DescribeFor(dir string, _ func(permission, pattern string) bool) string {
	ctx := context.Background()
	p, err := t.h.current(ctx)
	if err != nil {
		return ""
	}
	m, err := t.h.instance(ctx, p, dir)
	if err != nil {
		return ""
	}
	for _, d := range m.tools {
		if d.Name == t.name {
			return d.Description
		}
	}
	return ""
}

// Run implements tool.Tool: the host runs the plugin's execute with
// opencode's tool context; metadata goes to the call's progress, asks
// through the engine's durable asks; an abort cancels the context's
// signal. A host that dies during the call fails it.
func (t *pluginTool) Run(ctx context.Context, call tool.Call) (tool.Result, error) {
	h := t.h
	p, err := h.current(ctx)
	if err != nil {
		return tool.Errorf(err.Error()), nil
	}
	ref := call.ID
	if ref == "" {
		ref = core.NewID(core.PrefixPart, false)
	}
	h.calls.Store(ref, &callState{ctx: ctx, call: call})
	defer h.calls.Delete(ref)
	var args any = map[string]any{}
	if len(call.Input) > 0 {
		args = json.RawMessage(call.Input)
	}
	cctx, cancel := context.WithTimeoutCause(ctx, h.opts.ToolTimeout,
		fmt.Errorf("plugin tool %s did not finish within %s", t.name, h.opts.ToolTimeout))
	defer cancel()
	var res struct {
		Title    string         `json:"title"`
		Output   string         `json:"output"`
		Metadata map[string]any `json:"metadata"`
	}
	err = p.conn.call(cctx, "tool", map[string]any{"directory": call.Directory, "name": t.name, "args": args, "ref": ref,
		"context": map[string]any{"sessionID": call.SessionID, "messageID": call.MessageID, "callID": call.CallID, "agent": call.Agent}}, &res)
	if err != nil {
		if cctx.Err() != nil {
			_ = p.conn.notify("cancel", map[string]any{"ref": ref, "reason": context.Cause(cctx).Error()})
		}
		var he *HookError
		switch {
		case errors.As(err, &he) && strings.HasPrefix(he.Message, errHostGone.Error()):
			return tool.Errorf(fmt.Sprintf("plugin tool %s failed: the plugin host crashed during the call (%s); it is being restarted", t.name, he.Message)), nil
		case errors.As(err, &he):
			return tool.Errorf(he.Message), nil
		case ctx.Err() != nil:
			return tool.Result{}, ctx.Err()
		}
		return tool.Errorf(err.Error()), nil
	}
	return tool.Result{Title: res.Title, Output: res.Output, Metadata: res.Metadata}, nil
}

// Events hands committed events to the plugins' event hooks, without
// waiting (see eventQueue): the host delivers each to the instance of its
// session's directory (or to every instance, for events of no session). A
// host that is restarting misses them.
func (h *Host) Events(evs []core.Event) {
	if len(evs) == 0 || !h.wantEvents.Load() {
		return
	}
	h.events.push(false, evs...)
}
