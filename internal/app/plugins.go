package app

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/plugin"
	"github.com/agentd/agentd/internal/tool"
)

// Plugins is how a node runs opencode's plugins (see package plugin): none
// unless Specs lists some.
type Plugins struct {
	Specs []plugin.Spec
	// Dir is the plugin folder (default: PluginDir of the database).
	Dir string
	Bun string
	// Timeout bounds each awaited hook; ToolTimeout each call of a
	// plugin's tool (defaults: package plugin's).
	Timeout, ToolTimeout time.Duration
	// Workspace loads a session directory's own plugin files.
	Workspace bool
	// Env is the host's environment (nil: the tools').
	Env *tool.Env
	// Config is what the plugins' config hook gets.
	Config any
	// envNames is the operator's agentd.plugins.env (a project's is
	// refused), read into Env once the configuration is applied.
	envNames []string
}

// PluginDir is the plugin folder of a database: "plugins" beside a
// SQLite file, under the user's data directory for PostgreSQL.
func PluginDir(db string) string {
	if IsPostgres(db) {
		if d, err := os.UserHomeDir(); err == nil {
			return filepath.Join(d, ".local", "share", "agentd", "plugins")
		}
	}
	return filepath.Join(filepath.Dir(db), "plugins")
}

// pluginsFrom reads the plugins the configuration lists: the "plugin" keys
// of the operator's files (the project's agentd.json only when the
// operator's agentd.plugins.workspace allows it), and the .js and .ts
// files of the operator's folders' plugin and plugins.
func pluginsFrom(s Setup, loaded *config.Loaded) (Plugins, error) {
	project := ""
	if s.Workspace != "" {
		project = filepath.Join(s.Workspace, "agentd.json")
	}
	isProject := func(i int) bool { return loaded.Used[i] == project && !sameFile(project, s.ConfigFile) }
	out := pluginSettings(loaded, isProject, project)
	var dirs []string
	if s.GlobalDir != "" {
		dirs = append(dirs, s.GlobalDir)
	}
	if s.ConfigFile != "" {
		dirs = append(dirs, filepath.Dir(s.ConfigFile))
	}
	for _, d := range dirs {
		for _, f := range pluginFiles(d) {
			out.Specs = append(out.Specs, plugin.Spec{Spec: f, Path: f})
		}
	}
	for i, f := range loaded.Files {
		if isProject(i) && !out.Workspace {
			if len(f.Plugin) > 0 {
				loaded.Warnings = append(loaded.Warnings, config.Problem{File: project, Key: "plugin",
					Msg: "a project's plugins load only when the operator sets agentd.plugins.workspace"})
			}
			continue
		}
		for _, raw := range f.Plugin {
			sp, err := parseSpec(raw, filepath.Dir(loaded.Used[i]))
			if err != nil {
				return out, fmt.Errorf("%s: plugin: %w", loaded.Used[i], err)
			}
			out.Specs = append(out.Specs, sp)
		}
	}
	if out.Workspace && s.Workspace != "" {
		for _, f := range pluginFiles(filepath.Join(s.Workspace, ".opencode")) {
			out.Specs = append(out.Specs, plugin.Spec{Spec: f, Path: f})
		}
	}
	return out, nil
}

// pluginSettings are agentd.plugins of the operator's files (the last
// that sets it); a project's is refused with a warning.
func pluginSettings(loaded *config.Loaded, isProject func(int) bool, project string) Plugins {
	var out Plugins
	var set *config.Plugins
	for i, f := range loaded.Files {
		if f.Agentd.Plugins != nil && isProject(i) {
			loaded.Warnings = append(loaded.Warnings, config.Problem{File: project, Key: "agentd.plugins",
				Msg: "only the operator's files (the global agentd.json, --config) set agentd.plugins, not the project's"})
		} else if f.Agentd.Plugins != nil {
			set = f.Agentd.Plugins
		}
	}
	if set != nil {
		out.Dir, out.Bun, out.Workspace, out.envNames = set.Dir, set.Bun, set.Workspace, set.Env
		out.Timeout, _ = time.ParseDuration(set.Timeout)
		out.ToolTimeout, _ = time.ParseDuration(set.ToolTimeout)
	}
	return out
}

// pluginFiles are the .js and .ts files of dir's plugin and plugins.
func pluginFiles(dir string) []string {
	var out []string
	for _, sub := range []string{"plugin", "plugins"} {
		entries, _ := os.ReadDir(filepath.Join(dir, sub))
		for _, e := range entries {
			if !e.IsDir() && (strings.HasSuffix(e.Name(), ".js") || strings.HasSuffix(e.Name(), ".ts")) {
				out = append(out, filepath.Join(dir, sub, e.Name()))
			}
		}
	}
	return out
}

// parseSpec reads one entry of "plugin": "spec" or ["spec", {options}].
// A spec that names a file (file://, /, ./, ../, ~/) is made absolute
// (relative ones from the configuration file's folder); any other is an
// npm package, name and optional @version.
func parseSpec(raw json.RawMessage, dir string) (plugin.Spec, error) {
	var sp plugin.Spec
	if err := json.Unmarshal(raw, &sp.Spec); err != nil {
		var pair []json.RawMessage
		if json.Unmarshal(raw, &pair) != nil || len(pair) != 2 || json.Unmarshal(pair[0], &sp.Spec) != nil ||
			json.Unmarshal(pair[1], &sp.Options) != nil {
			return sp, fmt.Errorf("%s: want \"spec\" or [\"spec\", {options}]", raw)
		}
	}
	s := sp.Spec
	switch {
	case s == "":
		return sp, fmt.Errorf("an empty plugin spec")
	case strings.HasPrefix(s, "file://"):
		sp.Path = strings.TrimPrefix(s, "file://")
	case strings.HasPrefix(s, "~/"):
		home, _ := os.UserHomeDir()
		sp.Path = filepath.Join(home, s[2:])
	case filepath.IsAbs(s):
		sp.Path = s
	case strings.HasPrefix(s, "./") || strings.HasPrefix(s, "../"):
		sp.Path = filepath.Join(dir, s)
	default:
		sp.Path = PackageName(s)
	}
	return sp, nil
}

// PackageName is an npm spec's package name: "name@1.2.3" → "name",
// "@scope/name@1" → "@scope/name".
func PackageName(spec string) string {
	if i := strings.LastIndex(spec, "@"); i > 0 {
		return spec[:i]
	}
	return spec
}

// startPlugins starts the plugin host when the configuration lists
// plugins; nil otherwise. url is read when an instance is made.
func startPlugins(ctx context.Context, cfg *Config, tools *tool.Registry, url *atomic.Value) (*plugin.Host, error) {
	pl := cfg.Plugins
	if len(pl.Specs) == 0 {
		return nil, nil
	}
	if pl.Dir == "" {
		pl.Dir = PluginDir(cfg.DBPath)
	}
	env := pl.Env
	if env == nil {
		env = cfg.Engine.ToolEnv
	}
	var headers map[string]string
	if pw := cfg.Security.Password; pw != "" {
		user := cfg.Security.Username
		if user == "" {
			user = "opencode"
		}
		headers = map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw))}
	}
	h := plugin.New(plugin.Options{Bun: pl.Bun, Dir: pl.Dir, Plugins: pl.Specs, Config: pl.Config, Workspace: pl.Workspace,
		Timeout: pl.Timeout, ToolTimeout: pl.ToolTimeout, Env: env.Environ(), Logger: cfg.Logger,
		Server: func() (string, map[string]string) {
			u, _ := url.Load().(string)
			return u, headers
		}})
	if err := h.Start(ctx); err != nil {
		return nil, err
	}
	if _, err := cfg.credentialKeys(); err == nil && cfg.Credentials != nil {
		h.SetCredentials(pluginCredentials{cfg.Credentials})
	}
	tools.AddSource(h.Tools())
	cfg.Engine.Hooks = h
	return h, nil
}

// pluginEvents is the commit hook's part for plugins: every event on a
// single node; on a shared database, where every node's hook sees the
// whole log, the events this node committed (committed: the store's
// Committed), so that each reaches the plugins once across the cluster:
// a run's by the node executing it, the others' by the node that served
// the request.
func pluginEvents(h *plugin.Host, committed func(seq int64) bool) func([]core.Event) {
	if h == nil {
		return func([]core.Event) {}
	}
	return func(evs []core.Event) {
		if committed != nil {
			evs = slices.DeleteFunc(slices.Clone(evs), func(ev core.Event) bool { return !committed(ev.Seq) })
		}
		h.Events(evs)
	}
}

// commandHook is the plugins' command.execute.before, nil without plugins.
func commandHook(h *plugin.Host) func(ctx context.Context, dir, sessionID, name, args string, parts any) error {
	if h == nil {
		return nil
	}
	return h.Command
}

// PluginHost is the node's plugin host, nil without plugins.
func (a *App) PluginHost() *plugin.Host { return a.plugins }
