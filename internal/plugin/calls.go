package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/tool"
	"github.com/agentd/agentd/internal/vcs"
)

// made is a directory's plugin instance as the host described it: the
// hooks its plugins define and the tools they offer.
type made struct {
	ready chan struct{}
	err   error
	hooks map[string]bool
	tools []ToolDef
}

// ToolDef is a tool a plugin offers.
type ToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// instanceParams is what the host needs to make a directory's instance:
// opencode's PluginInput less what the host makes itself ($, client).
type instanceParams struct {
	Directory string            `json:"directory"`
	Worktree  string            `json:"worktree"`
	Project   projectJSON       `json:"project"`
	ServerURL string            `json:"serverUrl"`
	Headers   map[string]string `json:"headers,omitempty"`
	Local     []string          `json:"local,omitempty"`
}

type projectJSON struct {
	ID       string `json:"id"`
	Worktree string `json:"worktree"`
	VCS      string `json:"vcs,omitempty"`
	Name     string `json:"name,omitempty"`
	Time     struct {
		Created int64 `json:"created"`
		Updated int64 `json:"updated"`
	} `json:"time"`
	Sandboxes []string `json:"sandboxes"`
}

func (h *Host) params(dir string) instanceParams {
	url, headers := h.opts.Server()
	p := instanceParams{Directory: dir, Worktree: dir, ServerURL: url, Headers: headers}
	p.Project = projectJSON{ID: "global", Worktree: "/", Sandboxes: []string{}}
	if root, ok := vcs.Root(dir); ok {
		p.Worktree = root
		p.Project.Worktree, p.Project.VCS, p.Project.Name = root, "git", filepath.Base(root)
	}
	now := time.Now().UnixMilli()
	p.Project.Time.Created, p.Project.Time.Updated = now, now
	if h.opts.Workspace {
		p.Local = workspacePlugins(dir)
	}
	return p
}

// workspacePlugins are a directory's own plugin files, as opencode finds
// them: .opencode/plugin and .opencode/plugins, *.js and *.ts.
func workspacePlugins(dir string) []string {
	var out []string
	for _, sub := range []string{"plugin", "plugins"} {
		entries, _ := os.ReadDir(filepath.Join(dir, ".opencode", sub))
		for _, e := range entries {
			if !e.IsDir() && (strings.HasSuffix(e.Name(), ".js") || strings.HasSuffix(e.Name(), ".ts")) {
				out = append(out, filepath.Join(dir, ".opencode", sub, e.Name()))
			}
		}
	}
	return out
}

// instance returns the directory's instance on p, made on first use. It
// is made apart from its callers, each of whom waits for it as long as
// its ctx lets it (the set-up has a timeout of its own).
func (h *Host) instance(ctx context.Context, p *proc, dir string) (*made, error) {
	p.mu.Lock()
	m := p.known[dir]
	if m == nil {
		m = &made{ready: make(chan struct{})}
		p.known[dir] = m
		go h.setUp(context.WithoutCancel(ctx), p, dir, m)
	}
	p.mu.Unlock()
	select {
	case <-m.ready:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	if m.err != nil {
		return nil, &HookError{Message: "plugins: " + m.err.Error()}
	}
	return m, nil
}

// setUp makes the directory's instance m on p, within the set-up's
// timeout (or until the host exits).
func (h *Host) setUp(ctx context.Context, p *proc, dir string, m *made) {
	var res struct {
		Hooks  []string
		Tools  []ToolDef
		Errors []struct{ Spec, Error string }
	}
	cctx, cancel := context.WithTimeoutCause(ctx, max(h.opts.Timeout, 30*time.Second),
		errors.New("plugins did not finish their set-up in time"))
	m.err = p.conn.call(cctx, "instance", h.params(dir), &res)
	cancel()
	for _, e := range res.Errors {
		h.log.Error("plugin failed in its set-up", "plugin", e.Spec, "directory", dir, "err", e.Error)
	}
	m.hooks = map[string]bool{}
	for _, name := range res.Hooks {
		m.hooks[name] = true
	}
	m.tools = res.Tools
	if m.hooks["event"] {
		h.wantEvents.Store(true)
	}
	if m.err != nil {
		p.mu.Lock()
		delete(p.known, dir)
		p.mu.Unlock()
		h.timedOut(p, m.err)
	}
	close(m.ready)
}

// has reports whether any plugin of the directory's instance defines the
// hook, making the instance if needed.
func (h *Host) has(ctx context.Context, dir, name string) (*proc, bool, error) {
	p, err := h.current(ctx)
	if err != nil {
		return nil, false, err
	}
	m, err := h.instance(ctx, p, dir)
	if err != nil {
		return nil, false, err
	}
	return p, m.hooks[name], nil
}

// hook runs opencode's trigger: each plugin's hook in turn, changing
// output, which the host sends back whole into result. Nothing is sent
// when no plugin defines the hook.
func (h *Host) hook(ctx context.Context, dir, sessionID, name string, input, output, result any) error {
	p, ok, err := h.has(ctx, dir, name)
	if err != nil || !ok {
		return err
	}
	return h.batch(ctx, p, dir, sessionID, []hookCall{{name, input, output}}, []any{result})
}

// batch runs several triggers in one round trip, bounded by one hook
// timeout, their outputs decoded into outs (pointers), in order.
func (h *Host) batch(ctx context.Context, p *proc, dir, sessionID string, calls []hookCall, outs []any) error {
	var names []string
	for _, c := range calls {
		if len(names) == 0 || names[len(names)-1] != c.Name {
			names = append(names, c.Name)
		}
	}
	what := strings.Join(names, ", ")
	cctx, cancel := context.WithTimeoutCause(ctx, h.opts.Timeout,
		fmt.Errorf("no answer within %s (agentd.plugins.timeout)", h.opts.Timeout))
	defer cancel()
	res := struct {
		Outputs []any `json:"outputs"`
	}{Outputs: outs}
	err := p.conn.call(cctx, "hooks", map[string]any{"directory": dir, "sessionID": sessionID, "calls": calls}, &res)
	if err == nil && len(res.Outputs) != len(calls) {
		err = errors.New("the host answered for a different number of hooks")
	}
	if err != nil {
		h.timedOut(p, err)
		return &HookError{Message: fmt.Sprintf("plugin hook %s: %v", what, err)}
	}
	return nil
}

// timedOut probes the host after a call that got no answer.
func (h *Host) timedOut(p *proc, err error) {
	var he *HookError
	if err != nil && !errors.As(err, &he) && !errors.Is(err, context.Canceled) {
		h.probe(p)
	}
}

// callState is a plugin tool's call while it runs: where its progress
// goes and how its asks are decided.
type callState struct {
	ctx  context.Context
	call tool.Call
}

// serve answers the host's requests and notifications.
func (h *Host) serve(m message) (any, error) {
	if res, ok, err := h.serveAuth(m); ok {
		return res, err
	}
	var p struct {
		Ref        string         `json:"ref"`
		Title      string         `json:"title"`
		Metadata   map[string]any `json:"metadata"`
		Permission string         `json:"permission"`
		Patterns   []string       `json:"patterns"`
		Always     []string       `json:"always"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		return nil, err
	}
	v, ok := h.calls.Load(p.Ref)
	if !ok {
		return nil, errors.New("the tool call has ended")
	}
	c := v.(*callState)
	switch m.Method {
	case "tool.metadata":
		if c.call.Progress != nil {
			md := map[string]any{}
			for k, v := range p.Metadata {
				md[k] = v
			}
			if p.Title != "" {
				md["title"] = p.Title
			}
			c.call.Progress(md)
		}
		return nil, nil
	case "tool.ask":
		if c.call.Ask == nil {
			return nil, errors.New("this call cannot ask")
		}
		need := tool.Need{Permission: p.Permission, Patterns: p.Patterns, Always: slices.Clip(p.Always), Metadata: p.Metadata,
			Title: p.Permission + " " + strings.Join(p.Patterns, ", ")}
		return struct{}{}, c.call.Ask(c.ctx, need)
	}
	return nil, fmt.Errorf("unknown method %s", m.Method)
}
