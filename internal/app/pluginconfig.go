package app

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"reflect"
	"slices"
	"time"

	"github.com/agentd/agentd/internal/agent"
	"github.com/agentd/agentd/internal/command"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/plugin"
)

// Plugins' config hooks. opencode hands its plugins' config hooks the
// live configuration, and what they add or change (commands, agents, …)
// takes effect. agentd has one configuration, the operator's: the hooks
// of the instance made at start for the server's directory change it for
// the node, within what a plugin may change (pluginKeys). A plugin may
// add, change or remove commands; add or change agents, whose permission
// rules it may only tighten (only its deny rules are kept) and whose
// tools it may only switch off; add instructions; pick the default and
// the small model among the configured ones. Every other key stays the
// operator's, and a change to it is logged and ignored: agentd's own
// block (the sandbox, the plugins, the tools' environment), permission,
// provider (credentials, endpoints), mcp (processes started outside the
// sandbox), plugin, tools, snapshot.
var pluginKeys = []string{"command", "agent", "instructions", "model", "small_model"}

// pluginConfigWait bounds the wait for the config hooks at start.
const pluginConfigWait = 10 * time.Second

// pluginConfig applies what the plugins' config hooks changed; commands
// is the node's command catalog. A config hook that cannot be read back
// leaves the configuration as it is (logged): it never stops the server.
func pluginConfig(ctx context.Context, cfg *Config, h *plugin.Host, commands *command.Catalog) {
	if h == nil {
		return
	}
	dir := cfg.Directory
	if dir == "" {
		dir, _ = os.Getwd()
	}
	// A plugin whose set-up awaits its client (agentd, not serving yet)
	// is not waited for: its instance is made meanwhile, and used later.
	cctx, cancel := context.WithTimeout(ctx, pluginConfigWait)
	defer cancel()
	after, err := h.Config(cctx, dir)
	if err != nil || after == nil {
		if err != nil {
			cfg.Logger.Warn("the plugins' config hooks are not read back", "err", err)
		}
		return
	}
	before, err := json.Marshal(cfg.Plugins.Config)
	if err != nil {
		return
	}
	was, now := map[string]any{}, map[string]any{}
	if json.Unmarshal(before, &was) != nil || json.Unmarshal(after, &now) != nil {
		cfg.Logger.Warn("the plugins' config hooks left no configuration object; ignored")
		return
	}
	var base, f config.File
	_ = json.Unmarshal(before, &base)
	_ = json.Unmarshal(before, &f)
	changed := map[string]bool{}
	for _, k := range slices.Sorted(maps.Keys(joinKeys(was, now))) {
		if reflect.DeepEqual(was[k], now[k]) {
			continue
		}
		if !slices.Contains(pluginKeys, k) {
			cfg.Logger.Warn("a plugin's config hook changed a key only the operator sets; ignored", "key", k)
			continue
		}
		if err := readKey(&f, k, now[k]); err != nil {
			cfg.Logger.Warn("a plugin's config hook set a key agentd cannot read; ignored", "key", k, "err", err)
			continue
		}
		changed[k] = true
	}
	if len(changed) > 0 {
		applyPluginConfig(cfg, base, f, changed, was, now, commands)
	}
}

func joinKeys(a, b map[string]any) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// readKey sets f's key k to v (the hooks' JSON value).
func readKey(f *config.File, k string, v any) error {
	b, err := json.Marshal(map[string]any{k: v})
	if err != nil {
		return err
	}
	switch k {
	case "command":
		f.Command = nil
	case "agent":
		f.Agent = nil
	case "instructions":
		f.Instructions = nil
	}
	return json.Unmarshal(b, f)
}

// applyPluginConfig applies the changed keys of f (base is the operator's
// configuration, was and now the hooks' configuration before and after).
func applyPluginConfig(cfg *Config, base, f config.File, changed map[string]bool, was, now map[string]any, commands *command.Catalog) {
	log := cfg.Logger
	if changed["command"] {
		cfg.Commands, _ = commandSet(f, log) // a plugin's: never an error
		if commands != nil {
			commands.Config = cfg.Commands
		}
	}
	if changed["agent"] {
		agents, err := pluginAgents(cfg, base, f, was, now)
		if err != nil {
			log.Warn("a plugin's agents are ignored", "err", err)
			delete(changed, "agent")
		} else {
			cfg.Engine.Agents = agent.NewSet(agents)
		}
	}
	if changed["instructions"] {
		cfg.Engine.Instructions = f.Instructions
	}
	for _, k := range []string{"model", "small_model"} {
		if !changed[k] {
			continue
		}
		s := f.Model
		if k == "small_model" {
			s = f.SmallModel
		}
		ref, err := config.ParseModel(s)
		if err == nil {
			_, _, err = cfg.Models.Resolve(ref)
		}
		if err != nil {
			log.Warn("a plugin's model is not configured; ignored", "key", k, "model", s, "err", err)
			delete(changed, k)
			continue
		}
		if k == "model" {
			cfg.Engine.DefaultModel = ref
		} else {
			cfg.Engine.SmallModel = &ref
		}
	}
	pluginCatalog(cfg, changed, now)
	log.Info("the plugins' config hooks changed the configuration", "keys", slices.Sorted(maps.Keys(changed)))
}

// pluginAgents are the agents of f, those a plugin added or changed made
// no looser than the operator's: the operator's (or built-in) rules and
// tools, with the plugin's deny rules added and the tools it switched off.
func pluginAgents(cfg *Config, base, f config.File, was, now map[string]any) ([]agent.Agent, error) {
	agents, err := f.Agents(cfg.Directory)
	if err != nil {
		return nil, err
	}
	operator, err := base.Agents(cfg.Directory)
	if err != nil {
		return nil, err
	}
	wasAgents, _ := was["agent"].(map[string]any)
	nowAgents, _ := now["agent"].(map[string]any)
	for i, a := range agents {
		if reflect.DeepEqual(wasAgents[a.Name], nowAgents[a.Name]) {
			continue
		}
		var rules []core.Rule
		tools := maps.Clone(base.Tools)
		if j := slices.IndexFunc(operator, func(o agent.Agent) bool { return o.Name == a.Name }); j >= 0 {
			rules, tools = slices.Clone(operator[j].Permission), maps.Clone(operator[j].Tools)
		}
		loose := false
		for _, r := range a.Permission {
			switch {
			case slices.Contains(rules, r):
			case r.Action == core.ActionDeny:
				rules = append(rules, r)
			default:
				loose = true
			}
		}
		if loose {
			cfg.Logger.Warn("a plugin's agent rules that do not deny are not applied", "agent", a.Name)
		}
		for name, on := range f.Agent[a.Name].Tools {
			if !on {
				if tools == nil {
					tools = map[string]bool{}
				}
				tools[name] = false
			}
		}
		agents[i].Permission, agents[i].Tools = rules, tools
	}
	return agents, nil
}

// pluginCatalog tells clients of the changes: GET /config shows the keys
// the plugins changed as they now are, GET /agent the agents.
func pluginCatalog(cfg *Config, changed map[string]bool, now map[string]any) {
	def := cfg.Engine.DefaultModel
	if def.ProviderID == "" {
		def = scriptedRef
	}
	if cfg.Catalog == nil {
		c := Catalog(config.File{}, def, cfg.Engine.Permission, cfg.Engine.Agents.All())
		cfg.Catalog = &c
	}
	c := *cfg.Catalog
	c.Config = maps.Clone(c.Config)
	if c.Config == nil {
		c.Config = map[string]any{}
	}
	for k := range changed {
		c.Config[k] = now[k]
	}
	if changed["agent"] {
		c.Agents = Catalog(config.File{}, def, cfg.Engine.Permission, cfg.Engine.Agents.All()).Agents
	}
	if changed["model"] {
		c.Default = def
	}
	cfg.Catalog = &c
}
