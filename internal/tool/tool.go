// Package tool defines the tools the agent loop offers a model, and their
// two error channels: a Result with IsError is a failure the model sees and
// reacts to (bad input, missing file, non-zero exit); a Go error is an
// infrastructure failure that ends the step.
package tool

import (
	"context"
	"encoding/json"
	"slices"
	"sort"
	"sync"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/permission"
	"github.com/agentd/agentd/internal/sandbox"
)

// Call is one invocation of a tool.
type Call struct {
	// ID identifies the call uniquely (its part's id); Scope names the
	// server's database, so that processes a call leaves behind can be
	// found again after a crash.
	ID        string
	Scope     string
	SessionID string
	MessageID string
	CallID    string
	// Agent is the name of the run's agent.
	Agent string
	// Directory is the session's workspace.
	Directory string
	Input     json.RawMessage
	// AllowExternal is set when the external_directory permission was
	// granted for this call: paths outside the workspace are accepted.
	AllowExternal bool
	// ReadDirs are directories outside the workspace that read-only tools
	// may read without asking (where agentd keeps the session's cut tool
	// output).
	ReadDirs []string
	// Env is the environment of processes the call starts (nil: the
	// server's, less Secrets).
	Env *Env
	// Sandbox confines the processes the call starts (nil: they run
	// unconfined). Every tool that starts a process starts it through
	// Sandbox.Wrap.
	Sandbox *sandbox.Sandbox
	// Progress, when set, takes what a long call has to show while it
	// runs (bash: its output so far), as the running state's metadata.
	// Tools call it at most a few times a second.
	Progress func(metadata map[string]any)
	// Todos reads the session's todo list as stored.
	Todos func(ctx context.Context) ([]core.Todo, error)
	// Ask, when set, asks a permission while the call runs (a plugin
	// tool's context.ask), under the same rules and durable requests as
	// the needs asked before it: nil when allowed, an error the tool
	// reports when denied or rejected.
	Ask func(ctx context.Context, need Need) error
}

// Need is one permission a call needs before it may run.
type Need struct {
	// Permission is the key rules are written for: bash, edit, read,
	// external_directory …
	Permission string
	// Patterns are matched against rules; all must be allowed.
	Patterns []string
	// Always are the patterns an "always" reply allows from then on.
	Always   []string
	Title    string
	Metadata map[string]any
	// Detail, when set, adds to Metadata what is worth computing only when
	// the need asks (an edit's diff, for the ask dialog): it is called
	// once, before the request is recorded.
	Detail func() map[string]any
	// Exact are those of Patterns that an "always" answer allows only when
	// it named that very pattern: commands whose arguments let them do
	// more than a wildcard grant's name says (find -exec, sudo …).
	Exact []string
	// Ask makes the need ask where the rules would allow it (a deny still
	// denies), for calls whose patterns cannot be trusted to say what the
	// call does, such as a shell command that does not parse.
	Ask bool
	// Opaque are those of Patterns that run something their text does not
	// show (a command named at run time, a program piped into a shell,
	// arithmetic on a variable): rules cannot be checked against what
	// they run, so where the operator or the client denies anything of
	// the permission, they are denied too.
	Opaque []string
}

// Decide is the need's action under the operator's, the client's and the
// granted rules: deny when a pattern is denied (or is opaque where
// something is denied), ask when one asks (or the need always asks), else
// allow.
func (n Need) Decide(operator, client, granted []core.Rule) string {
	action := core.ActionAllow
	denies := len(n.Opaque) > 0 && (permission.DeniesAny(operator, n.Permission) || permission.DeniesAny(client, n.Permission))
	for _, pat := range n.Patterns {
		if denies && slices.Contains(n.Opaque, pat) {
			return core.ActionDeny
		}
		decide := permission.Decide
		if slices.Contains(n.Exact, pat) {
			decide = permission.DecideExact
		}
		switch decide(operator, client, granted, n.Permission, pat) {
		case core.ActionDeny:
			return core.ActionDeny
		case core.ActionAsk:
			action = core.ActionAsk
		}
	}
	if n.Ask {
		action = core.ActionAsk
	}
	return action
}

// ReadOnly is implemented by tools that never change files (read, grep,
// list …). A step that calls only such tools takes no snapshot of the
// workspace: snapshots cost git processes, and there is nothing to undo.
type ReadOnly interface {
	ReadOnly() bool
}

// Mutates reports whether t may change files: every tool that does not
// say it is read-only (bash, edit, write, subagents, MCP tools).
func Mutates(t Tool) bool {
	ro, ok := t.(ReadOnly)
	return !ok || !ro.ReadOnly()
}

// Contextual is implemented by tools whose description depends on where a
// run works and on what it may do: the skill tool lists the skills of the
// session's directory that the rules do not deny. DescribeFor returns ""
// when the tool has nothing to offer there; it is then left out of the
// run's tools.
type Contextual interface {
	DescribeFor(dir string, denied func(permission, pattern string) bool) string
}

// Permissioned is implemented by tools that need permissions. Needs must
// not have side effects; bad input yields no needs (Run reports it).
type Permissioned interface {
	Needs(call Call) []Need
}

// Result is what the model sees.
type Result struct {
	Output   string
	Title    string
	Metadata map[string]any
	IsError  bool
	// Todos, when set, replaces the session's todo list in the transaction
	// that records the call's result: the list changes if and only if the
	// call is recorded as completed, crash or not.
	Todos *[]core.Todo
}

// Errorf builds a Result the model sees as a failed tool call.
func Errorf(msg string) Result { return Result{Output: msg, IsError: true} }

// Tool is one capability offered to the model.
type Tool interface {
	Name() string
	Description() string
	// Schema is the JSON Schema of the input object.
	Schema() json.RawMessage
	Run(ctx context.Context, call Call) (Result, error)
}

// Registry holds the tools by name.
type Registry struct {
	mu      sync.RWMutex
	tools   map[string]Tool
	sources []Source
}

// NewRegistry returns a registry holding the given tools.
func NewRegistry(tools ...Tool) *Registry {
	r := &Registry{tools: make(map[string]Tool)}
	for _, t := range tools {
		r.Add(t)
	}
	return r
}

// Add registers t, replacing a tool of the same name.
func (r *Registry) Add(t Tool) {
	r.mu.Lock()
	r.tools[t.Name()] = t
	r.mu.Unlock()
}

// Source supplies tools that come and go, such as an MCP server's: the
// registry asks it each time.
type Source interface {
	Tools() []Tool
}

// AddSource adds tools that a source supplies. A registered tool wins over
// a source's of the same name.
func (r *Registry) AddSource(s Source) {
	r.mu.Lock()
	r.sources = append(r.sources, s)
	r.mu.Unlock()
}

// Get returns the named tool.
func (r *Registry) Get(name string) (Tool, bool) {
	r.mu.RLock()
	t, ok := r.tools[name]
	sources := r.sources
	r.mu.RUnlock()
	if ok {
		return t, true
	}
	for _, s := range sources {
		for _, t := range s.Tools() {
			if t.Name() == name {
				return t, true
			}
		}
	}
	return nil, false
}

// All returns the tools sorted by name.
func (r *Registry) All() []Tool {
	r.mu.RLock()
	out := make([]Tool, 0, len(r.tools))
	taken := make(map[string]bool, len(r.tools))
	for name, t := range r.tools {
		out = append(out, t)
		taken[name] = true
	}
	sources := r.sources
	r.mu.RUnlock()
	for _, s := range sources {
		for _, t := range s.Tools() {
			if !taken[t.Name()] {
				taken[t.Name()] = true
				out = append(out, t)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

// Func adapts a function into a Tool, for small built-ins and tests.
type Func struct {
	ToolName string
	Desc     string
	Input    json.RawMessage
	Fn       func(ctx context.Context, call Call) (Result, error)
}

// Name implements Tool.
func (f *Func) Name() string { return f.ToolName }

// Description implements Tool.
func (f *Func) Description() string { return f.Desc }

// Schema implements Tool.
func (f *Func) Schema() json.RawMessage {
	if len(f.Input) == 0 {
		return json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return f.Input
}

// Run implements Tool.
func (f *Func) Run(ctx context.Context, call Call) (Result, error) { return f.Fn(ctx, call) }
