// Package config reads agentd.json, whose provider keys follow opencode's
// so that an opencode provider block pasted in works unchanged, and turns it
// into the model registry the engine uses.
package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/agent"
	"github.com/agentd/agentd/internal/mcp"
	"github.com/agentd/agentd/internal/permission"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/llm/scripted"
)

// File is the content of agentd.json.
type File struct {
	Model      string              `json:"model"`
	SmallModel string              `json:"small_model"`
	Provider   map[string]Provider `json:"provider"`
	// Permission is opencode's permission config; see package permission.
	Permission json.RawMessage `json:"permission"`
	// Instructions are files (paths or globs) whose text joins the system
	// prompt, opencode's key.
	Instructions []string `json:"instructions"`
	// Agent configures agents by name (opencode's key), built-in ones
	// included.
	Agent map[string]AgentConfig `json:"agent"`
	// MCP configures MCP servers by name (opencode's key).
	MCP map[string]mcp.Server `json:"mcp"`
	// Command defines custom commands by name (opencode's key); they
	// override command files of the same name.
	Command map[string]CommandConfig `json:"command"`
	// Tools turns tools on or off for every agent (opencode's key); an
	// agent's own "tools" wins.
	Tools map[string]bool `json:"tools"`
	// Snapshot, when false, keeps no snapshots of the workspace (no diff,
	// no revert), as in opencode.
	Snapshot *bool `json:"snapshot"`
	// Plugin lists opencode plugins (opencode's key): npm specs
	// ("name@version") installed in the plugin folder, or files; each a
	// string or [spec, options]. Files' lists add up.
	Plugin []json.RawMessage `json:"plugin"`
	// Agentd holds agentd's own settings.
	Agentd Settings `json:"agentd"`
	// EnvRefs are the variables the file read with {env:…}.
	EnvRefs []string `json:"-"`
}

// CommandConfig is one custom command, opencode's keys.
type CommandConfig struct {
	Template    string `json:"template"`
	Description string `json:"description"`
	Agent       string `json:"agent"`
	Model       string `json:"model"`
	Subtask     bool   `json:"subtask"`
}

// AgentConfig is one agent of the configuration, opencode's keys.
type AgentConfig struct {
	Description string          `json:"description"`
	Mode        string          `json:"mode"`
	Model       string          `json:"model"`
	Variant     string          `json:"variant"`
	Prompt      string          `json:"prompt"`
	Tools       map[string]bool `json:"tools"`
	Permission  json.RawMessage `json:"permission"`
	Temperature *float64        `json:"temperature"`
	TopP        *float64        `json:"top_p"`
	Steps       int             `json:"steps"`
	MaxSteps    int             `json:"maxSteps"`
	Hidden      bool            `json:"hidden"`
	Disable     bool            `json:"disable"`
}

// Agents returns the built-in agents with the configuration applied:
// entries for a built-in name change it, "disable" removes it, others add
// agents. promptDir resolves {file:path} prompts.
func (f File) Agents(promptDir string) ([]agent.Agent, error) {
	list := agent.Builtins()
	names := make([]string, 0, len(f.Agent))
	for name := range f.Agent {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		c := f.Agent[name]
		i := slices.IndexFunc(list, func(a agent.Agent) bool { return a.Name == name })
		if c.Disable {
			if i >= 0 {
				list = slices.Delete(list, i, i+1)
			}
			continue
		}
		a := agent.Agent{Name: name, Mode: agent.ModeAll}
		if i >= 0 {
			a = list[i]
		}
		if c.Description != "" {
			a.Description = c.Description
		}
		switch c.Mode {
		case "":
		case agent.ModePrimary, agent.ModeSubagent, agent.ModeAll:
			a.Mode = c.Mode
		default:
			return nil, fmt.Errorf("agent.%s.mode: %q is not primary, subagent or all", name, c.Mode)
		}
		if c.Model != "" {
			ref, err := ParseModel(c.Model)
			if err != nil {
				return nil, fmt.Errorf("agent.%s.%w", name, err)
			}
			a.Model = &ref
		}
		if c.Variant != "" {
			a.Variant = c.Variant
		}
		if c.Prompt != "" {
			p, err := resolveFile(c.Prompt, promptDir)
			if err != nil {
				return nil, fmt.Errorf("agent.%s.prompt: %w", name, err)
			}
			a.Prompt = p
		}
		if c.Tools != nil {
			a.Tools = c.Tools
		}
		if len(c.Permission) > 0 {
			rules, err := permission.ParseConfig(c.Permission)
			if err != nil {
				return nil, fmt.Errorf("agent.%s.%w", name, err)
			}
			a.Permission = append(a.Permission, rules...)
		}
		if c.Temperature != nil {
			a.Temperature = c.Temperature
		}
		if c.TopP != nil {
			a.TopP = c.TopP
		}
		if c.Steps > 0 {
			a.Steps = c.Steps
		} else if c.MaxSteps > 0 {
			a.Steps = c.MaxSteps
		}
		a.Hidden = a.Hidden || c.Hidden
		if i >= 0 {
			list[i] = a
		} else {
			list = append(list, a)
		}
	}
	if len(f.Tools) > 0 {
		for i := range list {
			tools := maps.Clone(f.Tools)
			maps.Copy(tools, list[i].Tools)
			list[i].Tools = tools
		}
	}
	return list, nil
}

// resolveFile reads opencode's {file:path} references (relative to dir);
// other text is returned as it is.
func resolveFile(v, dir string) (string, error) {
	p, ok := strings.CutPrefix(v, "{file:")
	if !ok || !strings.HasSuffix(p, "}") {
		return v, nil
	}
	p = strings.TrimSuffix(p, "}")
	if strings.HasPrefix(p, "~/") {
		if h, err := os.UserHomeDir(); err == nil {
			p = filepath.Join(h, p[2:])
		}
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// Settings are agentd's own knobs.
type Settings struct {
	MaxSteps int       `json:"maxSteps"`
	Resume   *Resume   `json:"resume"`
	Retry    *Retry    `json:"retry"`
	Events   *Events   `json:"events"`
	Webfetch *Webfetch `json:"webfetch"`
	MCP      *MCP      `json:"mcp"`
	// Questions offers the model the question tool (it asks the user and
	// waits for the answer); off by default, since a client that never
	// answers leaves the run waiting.
	Questions bool `json:"questions"`
	// ToolEnv names the variables (or patterns with '*') of the server's
	// environment that tools see besides the allow-list (tool.Base: PATH,
	// HOME, LANG, LC_*, TERM, TZ, TMPDIR, …), including those agentd
	// otherwise keeps from tools: the providers' keys, the server's
	// password, what the configuration read with {env:…}.
	ToolEnv []string `json:"toolEnv"`
	// ProjectCommandAgents are the agents a project's command file (which
	// the model can write) may name; nil: the built-in build and plan,
	// unless this configuration gives them permission rules of its own.
	ProjectCommandAgents []string `json:"projectCommandAgents"`
	// Snapshot places the snapshot stores.
	Snapshot *SnapshotSettings `json:"snapshot"`
	// Sandbox confines the commands run for the model (see
	// internal/sandbox). Only the operator's files set it: a project's
	// agentd.json, which the model can write, cannot.
	Sandbox *Sandbox `json:"sandbox"`
	// Terminal serves terminals to clients (opencode's /pty; the web
	// app's terminal panel); off unless enabled. Only the operator's
	// files set it, as the sandbox.
	Terminal *Terminal `json:"terminal"`
	// Asks ends asks nobody answers in time (operator's files only).
	Asks *Asks `json:"asks"`
	// Plugins sets how opencode's plugins run (see Plugins); only the
	// operator's files set it.
	Plugins *Plugins `json:"plugins"`
	// Webhooks signs and sends webhooks (see package webhook); off
	// without a secret. Only the operator's files set it.
	Webhooks *Webhooks `json:"webhooks"`
}

// MCP holds agentd's own MCP settings: Lazy connects the servers when a
// run first needs tools rather than at start; Add says which servers a
// client may add at run time (POST /mcp): "remote" ones (an http(s) URL
// the server connects to), or none when absent or "off". A local server
// is a command the server would run, so a client may never add one.
type MCP struct {
	Lazy bool   `json:"lazy"`
	Add  string `json:"add"`
}

// Webfetch opens networks to the webfetch tool that it refuses by default
// (this machine, private networks, link-local): Allow holds addresses or
// CIDR prefixes such as "127.0.0.1" or "10.1.0.0/16".
type Webfetch struct {
	Allow []string `json:"allow"`
}

// Events bounds the durable event log: events older than MaxAge (a Go
// duration, default "168h") or beyond the newest MaxCount (default
// 1,000,000) are pruned. A client resuming from a pruned position is told
// so with server.gap.
type Events struct {
	MaxAge   string `json:"maxAge"`
	MaxCount int    `json:"maxCount"`
}

// Retry bounds provider retries.
type Retry struct {
	MaxAttempts int    `json:"maxAttempts"`
	MaxElapsed  string `json:"maxElapsed"`
}

// Provider is opencode's provider block.
type Provider struct {
	NPM     string           `json:"npm"`
	Name    string           `json:"name"`
	Options ProviderOptions  `json:"options"`
	Models  map[string]Model `json:"models"`
	// FromEnv names the variable whose key enabled a stock provider that
	// the configuration does not mention.
	FromEnv string `json:"-"`
}

// ProviderOptions are the connection settings of a provider.
type ProviderOptions struct {
	BaseURL string            `json:"baseURL"`
	APIKey  string            `json:"apiKey"`
	Headers map[string]string `json:"headers"`
	// Timeout is in milliseconds; false (or absent) means none.
	Timeout json.RawMessage `json:"timeout"`
}

// Model is one model of a provider.
type Model struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Limit struct {
		Context int `json:"context"`
		Output  int `json:"output"`
	} `json:"limit"`
	// Cost is the price per million tokens (opencode's keys).
	Cost *struct {
		Input      float64 `json:"input"`
		Output     float64 `json:"output"`
		CacheRead  float64 `json:"cache_read"`
		CacheWrite float64 `json:"cache_write"`
	} `json:"cost"`
	// Options are sent with every call to the model (e.g. reasoningEffort,
	// thinking); Variants are named option sets a prompt may choose.
	Options  map[string]any            `json:"options"`
	Variants map[string]map[string]any `json:"variants"`
	// Modalities.Input lists what the model takes ("text", "image",
	// "pdf" …; opencode's keys); Attachment true without it means
	// pictures and PDFs. Without either, agentd's table of known models
	// decides, else text only.
	Attachment *bool       `json:"attachment"`
	Modalities *Modalities `json:"modalities"`
}

// llm returns what the engine needs to know of the model.
func (m Model) llm(id string) llm.Model {
	out := llm.Model{Name: id, Context: m.Limit.Context, Output: m.Limit.Output, Options: m.Options, Variants: m.Variants,
		Input: m.input()}
	if m.ID != "" {
		out.Name = m.ID
	}
	if m.Cost != nil {
		out.Cost = &llm.Price{Input: m.Cost.Input, Output: m.Cost.Output, CacheRead: m.Cost.CacheRead, CacheWrite: m.Cost.CacheWrite}
	}
	return out
}

// Paths lists the configuration files agentd reads, lowest precedence
// first: the global one, the workspace's, and an explicit one.
func Paths(workspace, explicit string) []string {
	var out []string
	if d, err := os.UserConfigDir(); err == nil {
		out = append(out, filepath.Join(d, "agentd", "agentd.json"))
	}
	if workspace != "" {
		out = append(out, filepath.Join(workspace, "agentd.json"))
	}
	if explicit != "" {
		out = append(out, explicit)
	}
	return out
}

// Loaded is a merged configuration and where it came from.
type Loaded struct {
	File File
	// Used lists the files read, lowest precedence first, and Files what
	// each of them held.
	Used  []string
	Files []File
	// Warnings name the opencode keys the files set that agentd does not
	// use.
	Warnings []Problem
}

// Load reads and merges the files that exist, each one once however it is
// named; a missing explicit file is an error, missing others are skipped.
// Every problem of every file is reported together (*Error).
func Load(paths []string, explicit string) (Loaded, error) {
	var out Loaded
	var problems []Problem
	var seen []os.FileInfo
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) && p != explicit {
			continue
		}
		if err != nil {
			return out, fmt.Errorf("read config %s: %w", p, err)
		}
		if st, err := os.Stat(p); err == nil {
			if slices.ContainsFunc(seen, func(o os.FileInfo) bool { return os.SameFile(o, st) }) {
				continue
			}
			seen = append(seen, st)
		}
		f, warnings, err := ParseFile(p, data, os.LookupEnv)
		out.Warnings = append(out.Warnings, warnings...)
		var ce *Error
		if errors.As(err, &ce) {
			problems = append(problems, ce.Problems...)
			continue
		}
		if err != nil {
			return out, fmt.Errorf("config %s: %w", p, err)
		}
		if err := f.Validate(); err != nil {
			problems = append(problems, Problem{File: p, Msg: err.Error()})
			continue
		}
		out.File = merge(out.File, f)
		out.Used = append(out.Used, p)
		out.Files = append(out.Files, f)
	}
	if len(problems) > 0 {
		return out, &Error{Problems: problems}
	}
	return out, nil
}

func merge(a, b File) File {
	if b.Snapshot != nil {
		a.Snapshot = b.Snapshot
	}
	if len(b.Tools) > 0 && a.Tools == nil {
		a.Tools = map[string]bool{}
	}
	for k, v := range b.Tools {
		a.Tools[k] = v
	}
	a.EnvRefs = append(a.EnvRefs, b.EnvRefs...)
	if b.Model != "" {
		a.Model = b.Model
	}
	if b.SmallModel != "" {
		a.SmallModel = b.SmallModel
	}
	if len(b.Provider) > 0 && a.Provider == nil {
		a.Provider = map[string]Provider{}
	}
	for k, v := range b.Provider {
		a.Provider[k] = v
	}
	if len(b.Permission) > 0 {
		a.Permission = b.Permission
	}
	a.Instructions = append(a.Instructions, b.Instructions...)
	if len(b.Agent) > 0 && a.Agent == nil {
		a.Agent = map[string]AgentConfig{}
	}
	for k, v := range b.Agent {
		a.Agent[k] = v
	}
	if len(b.MCP) > 0 && a.MCP == nil {
		a.MCP = map[string]mcp.Server{}
	}
	for k, v := range b.MCP {
		a.MCP[k] = v
	}
	if len(b.Command) > 0 && a.Command == nil {
		a.Command = map[string]CommandConfig{}
	}
	for k, v := range b.Command {
		a.Command[k] = v
	}
	a.Plugin = append(a.Plugin, b.Plugin...)
	mergeAgentd(&a.Agentd, b.Agentd)
	return a
}

// mergeAgentd lays b's agentd block over a's: each setting b gives
// replaces a's.
func mergeAgentd(a *Settings, b Settings) {
	if b.ToolEnv != nil {
		a.ToolEnv = b.ToolEnv
	}
	if b.ProjectCommandAgents != nil {
		a.ProjectCommandAgents = b.ProjectCommandAgents
	}
	if b.Questions {
		a.Questions = true
	}
	if b.MaxSteps != 0 {
		a.MaxSteps = b.MaxSteps
	}
	if b.Resume != nil {
		a.Resume = b.Resume
	}
	if b.Retry != nil {
		a.Retry = b.Retry
	}
	if b.MCP != nil {
		a.MCP = b.MCP
	}
	if b.Webfetch != nil {
		a.Webfetch = b.Webfetch
	}
	if b.Events != nil {
		a.Events = b.Events
	}
	if b.Snapshot != nil {
		a.Snapshot = b.Snapshot
	}
	if b.Sandbox != nil {
		a.Sandbox = b.Sandbox
	}
	if b.Terminal != nil {
		a.Terminal = b.Terminal
	}
	if b.Plugins != nil {
		a.Plugins = b.Plugins
	}
	if b.Webhooks != nil {
		a.Webhooks = b.Webhooks
	}
}

// ParseModel splits "provider/model" (the model id may contain slashes).
func ParseModel(s string) (core.ModelRef, error) {
	p, m, ok := strings.Cut(s, "/")
	if !ok || p == "" || m == "" {
		return core.ModelRef{}, fmt.Errorf("model %q: want provider/model", s)
	}
	return core.ModelRef{ProviderID: p, ModelID: m}, nil
}

// Providers returns the configured providers plus the stock ones that an
// API key in the environment enables (marked FromEnv).
func (f File) Providers() map[string]Provider {
	providers := map[string]Provider{}
	for k, v := range f.Provider {
		providers[k] = v
	}
	for id, p := range stock() {
		if _, ok := providers[id]; !ok {
			providers[id] = p
		}
	}
	return providers
}

// Build turns the configuration into a model registry and the default
// model. With no provider configured the default is agentd/scripted.
func (f File) Build() (*llm.Registry, core.ModelRef, error) { return f.BuildWith(nil) }

// BuildWith is Build with the keys clients stored (package credential):
// a provider configured without a key (and without one in its stock
// environment variable) asks keys for its key at each request, so that a
// key stored while the server runs is used at once. keys may be nil.
func (f File) BuildWith(keys func(providerID string) string) (*llm.Registry, core.ModelRef, error) {
	reg := llm.NewRegistry()
	reg.Add(scripted.ProviderID, &scripted.Model{}, nil)
	f.unconfigured(reg)
	for id, p := range f.Providers() {
		prov, err := p.provider(id, keys, reg)
		if err != nil {
			return nil, core.ModelRef{}, err
		}
		var models map[string]llm.Model
		if len(p.Models) > 0 {
			models = map[string]llm.Model{}
			for mid, m := range p.Models {
				models[mid] = m.llm(mid)
			}
		}
		reg.Add(id, prov, models)
	}
	def := core.ModelRef{ProviderID: scripted.ProviderID, ModelID: scripted.ModelID}
	if f.Model != "" {
		ref, err := ParseModel(f.Model)
		if err != nil {
			return nil, def, err
		}
		if _, _, err := reg.Resolve(ref); err != nil {
			return nil, def, fmt.Errorf("model %q: %w", f.Model, err)
		}
		def = ref
	}
	return reg, def, nil
}

func (p Provider) provider(id string, keys func(string) string, reg *llm.Registry) (llm.Provider, error) {
	timeout := time.Duration(0)
	if len(p.Options.Timeout) > 0 && string(p.Options.Timeout) != "false" {
		var ms float64
		if err := json.Unmarshal(p.Options.Timeout, &ms); err != nil {
			return nil, fmt.Errorf("provider %s: options.timeout: want milliseconds or false", id)
		}
		timeout = time.Duration(ms * float64(time.Millisecond))
	}
	kind, ok := kindOf(id, p.NPM)
	if !ok {
		return nil, fmt.Errorf("provider %s: npm package %q is not supported (use one of %s)", id, p.NPM, supported())
	}
	key := p.Options.APIKey
	if key == "" && id == kind.Stock {
		// The stock provider's key, as opencode reads it.
		key = os.Getenv(kind.KeyEnv)
	}
	conn := Conn{BaseURL: p.Options.BaseURL, APIKey: key, Headers: p.Options.Headers, Timeout: timeout}
	if reg != nil {
		reg.SetSetup(id, llm.Setup{Conn: conn, Build: kind.New, Missing: p.MissingKey(id)})
	}
	if key == "" && keys != nil {
		return &keyed{id: id, keys: keys, missing: p.MissingKey(id), build: func(key string) llm.Provider {
			c := conn
			c.APIKey = key
			return kind.New(c)
		}}, nil
	}
	return kind.New(conn), nil
}
