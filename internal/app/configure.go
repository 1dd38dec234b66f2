package app

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/agent"
	"github.com/agentd/agentd/internal/command"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/netguard"
	"github.com/agentd/agentd/internal/permission"
	"github.com/agentd/agentd/internal/snapshot"
	"github.com/agentd/agentd/internal/tool"
)

// Apply sets what a configuration file decides: the models and the
// default one, the permission rules, the agents, the instructions, the
// small model, the engine's budgets and what clients are told of them. dir resolves the file's
// relative references ({file:…} prompts).
func (c *Config) Apply(f config.File, dir string) error {
	keys, err := c.credentialKeys()
	if err != nil {
		return err
	}
	models, def, err := f.BuildWith(keys)
	if err != nil {
		return err
	}
	c.Models = models
	c.Engine.DefaultModel = def
	if c.Engine.Permission, err = permission.ParseConfig(f.Permission); err != nil {
		return err
	}
	agents, err := f.Agents(dir)
	if err != nil {
		return err
	}
	c.Engine.Agents = agent.NewSet(agents)
	c.Engine.Instructions = f.Instructions
	if f.SmallModel != "" {
		ref, err := config.ParseModel(f.SmallModel)
		if err != nil {
			return fmt.Errorf("small_model: %w", err)
		}
		if _, _, err := models.Resolve(ref); err != nil {
			return fmt.Errorf("small_model %q: %w", f.SmallModel, err)
		}
		c.Engine.SmallModel = &ref
	}
	if ev := f.Agentd.Events; ev != nil {
		if ev.MaxAge != "" {
			if c.EventMaxAge, err = time.ParseDuration(ev.MaxAge); err != nil || c.EventMaxAge <= 0 {
				return fmt.Errorf("agentd.events.maxAge %q: want a positive duration such as \"168h\"", ev.MaxAge)
			}
		}
		if ev.MaxCount < 0 {
			return fmt.Errorf("agentd.events.maxCount %d: want a positive count", ev.MaxCount)
		}
		c.EventMaxCount = ev.MaxCount
	}
	if wf := f.Agentd.Webfetch; wf != nil {
		if c.WebFetchAllow, err = netguard.ParseAllow("agentd.webfetch.allow", wf.Allow); err != nil {
			return err
		}
	}
	if err := c.applyCommands(f, agents); err != nil {
		return err
	}
	for name, srv := range f.MCP {
		if err := srv.Check(); err != nil {
			return fmt.Errorf("mcp.%s: %w", name, err)
		}
	}
	c.MCP = f.MCP
	if r := f.Agentd.Resume; r != nil {
		c.Engine.Resume, c.Engine.Pause.Server = *r != config.ResumeOff, *r == config.ResumePaused
	}
	c.Engine.MaxSteps = f.Agentd.MaxSteps
	if r := f.Agentd.Retry; r != nil {
		c.Engine.Retry.MaxAttempts = r.MaxAttempts
		if r.MaxElapsed != "" {
			if c.Engine.Retry.MaxElapsed, err = time.ParseDuration(r.MaxElapsed); err != nil {
				return fmt.Errorf("agentd.retry.maxElapsed: %w", err)
			}
		}
	}
	if c.Snapshot, err = snapshotOptions(f); err != nil {
		return err
	}
	c.Engine.ToolEnv = tool.NewEnv(append(config.KeyVars(), f.EnvRefs...), f.Agentd.ToolEnv)
	c.Engine.Questions = f.Agentd.Questions
	c.MCPLazy = f.Agentd.MCP != nil && f.Agentd.MCP.Lazy
	if f.Agentd.MCP != nil {
		c.MCPAdd = f.Agentd.MCP.Add
	}
	catalog := Catalog(f, def, c.Engine.Permission, agents)
	c.Catalog = &catalog
	return nil
}

// applyCommands sets the configuration's commands and the agents a
// project's command files may name.
func (c *Config) applyCommands(f config.File, agents []agent.Agent) error {
	var err error
	if c.Commands, err = Commands(f); err != nil {
		return err
	}
	c.ProjectCommandAgents, err = projectCommandAgents(f, agents)
	return err
}

// projectCommandAgents are the agents a project's command file may name:
// agentd.projectCommandAgents, each a known agent; by default the built-in
// build and plan, less those this configuration gives permission rules
// of its own (an operator who widens one keeps it from project files).
func projectCommandAgents(f config.File, agents []agent.Agent) ([]string, error) {
	if names := f.Agentd.ProjectCommandAgents; names != nil {
		for _, n := range names {
			if !slices.ContainsFunc(agents, func(a agent.Agent) bool { return a.Name == n }) {
				return nil, fmt.Errorf("agentd.projectCommandAgents: %q is not an agent", n)
			}
		}
		return names, nil
	}
	out := []string{}
	for _, n := range command.DefaultProjectAgents {
		if len(f.Agent[n].Permission) == 0 {
			out = append(out, n)
		}
	}
	return out, nil
}

// snapshotOptions reads "snapshot" (false: none) and agentd.snapshot.dir
// (an absolute path).
func snapshotOptions(f config.File) (snapshot.Options, error) {
	o := snapshot.Options{Disabled: f.Snapshot != nil && !*f.Snapshot}
	if sn := f.Agentd.Snapshot; sn != nil && sn.Dir != "" {
		if !filepath.IsAbs(sn.Dir) {
			return o, fmt.Errorf("agentd.snapshot.dir %q: want an absolute path", sn.Dir)
		}
		o.Dir = filepath.Clean(sn.Dir)
	}
	return o, nil
}

// Commands returns the configuration's custom commands (its "command"
// key), checked: each needs a template, and a model must read
// provider/model.
func Commands(f config.File) (command.Set, error) { return commandSet(f, nil) }

// commandSet is f's custom commands. With plugin nil they are an
// operator's, checked as Commands says. Otherwise they are as a plugin
// left them, and plugin logs what is left out: unlike an operator's
// file, a command may have no template, as in opencode (a plugin's
// command.execute.before makes its prompt: dcp's do); one whose model is
// not provider/model is left out.
func commandSet(f config.File, plugin *slog.Logger) (command.Set, error) {
	set := command.Set{}
	for name, cc := range f.Command {
		if plugin == nil && strings.TrimSpace(cc.Template) == "" {
			return nil, fmt.Errorf("command.%s.template: a command needs a template", name)
		}
		if cc.Model != "" {
			if _, err := config.ParseModel(cc.Model); err != nil {
				if plugin == nil {
					return nil, fmt.Errorf("command.%s.model: %w", name, err)
				}
				plugin.Warn("a plugin's command is left out", "command", name, "err", err)
				continue
			}
		}
		set[name] = command.Command{Name: name, Description: cc.Description, Agent: cc.Agent,
			Model: cc.Model, Template: cc.Template, Subtask: cc.Subtask}
	}
	return set, nil
}
