// Package agent holds agentd's agents: named configurations of the agent
// loop (which tools, which permissions, which prompt and model), opencode's
// built-in build, plan and general plus those of the configuration.
package agent

import (
	"embed"
	"sort"
	"strings"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/permission"
)

// Modes of an agent: primary agents answer prompts, subagents are started
// by the task tool, "all" may do both.
const (
	ModePrimary  = "primary"
	ModeSubagent = "subagent"
	ModeAll      = "all"
)

// Default is the agent of a prompt that names none.
const Default = "build"

// Agent is one agent.
type Agent struct {
	Name        string
	Description string
	Mode        string
	// Native marks the built-in agents.
	Native bool
	Hidden bool
	// Prompt is added to the system prompt of the agent's runs.
	Prompt string
	// Model, when set, is used by prompts that name no model.
	Model *core.ModelRef
	// Variant is the model variant used when the prompt names none.
	Variant string
	// Tools switches tools off (false) or on (true) by name; keys may hold
	// wildcards. Tools not named are on.
	Tools map[string]bool
	// Permission rules apply after the configuration's.
	Permission  []core.Rule
	Temperature *float64
	TopP        *float64
	// Steps bounds the model calls of a run (0: the server's maximum).
	Steps int
}

// Primary reports whether the agent may answer a prompt.
func (a Agent) Primary() bool { return a.Mode == ModePrimary || a.Mode == ModeAll || a.Mode == "" }

// ToolEnabled reports whether the agent offers the named tool; the last
// matching key of Tools decides, in sorted order so that "*" comes before
// specific names.
func (a Agent) ToolEnabled(name string) bool {
	on := true
	keys := make([]string, 0, len(a.Tools))
	for k := range a.Tools {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return strings.Count(keys[i], "*") > strings.Count(keys[j], "*") || keys[i] < keys[j]
	})
	for _, k := range keys {
		if permission.Match(k, name) {
			on = a.Tools[k]
		}
	}
	return on
}

//go:embed prompts/*.txt
var prompts embed.FS

func text(name string) string {
	b, err := prompts.ReadFile("prompts/" + name + ".txt")
	if err != nil {
		panic("agent: missing prompt " + name)
	}
	return strings.TrimSpace(string(b))
}

// Builtins returns the built-in agents.
func Builtins() []Agent {
	return []Agent{
		{Name: "build", Mode: ModePrimary, Native: true,
			Description: "The default agent: every tool, within the permission rules."},
		{Name: "plan", Mode: ModePrimary, Native: true, Prompt: text("plan"),
			Description: "Plans without changing anything: edits are denied, shell commands are asked.",
			Permission: []core.Rule{
				{Permission: "edit", Pattern: "*", Action: core.ActionDeny},
				{Permission: "bash", Pattern: "*", Action: core.ActionAsk},
			}},
		{Name: "general", Mode: ModeSubagent, Native: true, Prompt: text("general"),
			Description: "A general-purpose agent for research and multi-step tasks, started by the task tool.",
			// No subagents of its own (no unbounded nesting), and no todo
			// list: its task is one item of its parent's.
			Tools: map[string]bool{"task": false, "todowrite": false, "todoread": false}},
	}
}

// Set is the agents a server knows, by name.
type Set struct {
	list []Agent
}

// NewSet returns a set of agents, in the given order.
func NewSet(agents []Agent) *Set { return &Set{list: agents} }

// Get returns the named agent.
func (s *Set) Get(name string) (Agent, bool) {
	if s == nil {
		return Agent{}, false
	}
	for _, a := range s.list {
		if a.Name == name {
			return a, true
		}
	}
	return Agent{}, false
}

// All returns the agents in order.
func (s *Set) All() []Agent {
	if s == nil {
		return nil
	}
	return append([]Agent(nil), s.list...)
}
