package app

import (
	"os"
	"path/filepath"
	"slices"

	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/tool"
)

// Setup names where a server's configuration comes from. serve and run
// both go through Configure, so a file, a provider key in the
// environment or a flag means the same to either.
type Setup struct {
	// Workspace is the server's directory: its agentd.json is the
	// project's configuration, and relative references resolve there.
	Workspace string
	// ConfigFile is --config: read last, and an error when missing.
	ConfigFile string
	// GlobalDir holds the user's own agentd.json, AGENTS.md and commands
	// (default: agentd under the user's configuration directory).
	GlobalDir string
}

// Paths lists the configuration files of s, lowest precedence first.
func (s Setup) Paths() []string {
	var out []string
	if s.GlobalDir != "" {
		out = append(out, filepath.Join(s.GlobalDir, "agentd.json"))
	}
	if s.Workspace != "" {
		out = append(out, filepath.Join(s.Workspace, "agentd.json"))
	}
	if s.ConfigFile != "" {
		out = append(out, s.ConfigFile)
	}
	return out
}

// DefaultGlobalDir is agentd under the user's configuration directory
// ($XDG_CONFIG_HOME or ~/.config), or "" when there is none.
func DefaultGlobalDir() string {
	if d, err := os.UserConfigDir(); err == nil {
		return filepath.Join(d, "agentd")
	}
	return ""
}

// Configure reads the files of s and applies them to base: what base
// leaves unset comes from the files, then the environment (provider keys);
// flags are the caller's to apply afterwards. It returns what was read,
// for the start-up log and for config check.
func Configure(s Setup, base Config) (Config, config.Loaded, error) {
	loaded, err := config.Load(s.Paths(), s.ConfigFile)
	if err != nil {
		return base, loaded, err
	}
	base.Directory = s.Workspace
	base.Engine.GlobalDir = s.GlobalDir
	base.Sandbox = sandboxFrom(s, &loaded)
	base.Terminals = terminalsFrom(s, &loaded)
	if base.Plugins, err = pluginsFrom(s, &loaded); err != nil {
		return base, loaded, err
	}
	if base.Webhooks, err = webhooksFrom(s, &loaded); err != nil {
		return base, loaded, err
	}
	base.ConfigFiles = loaded.Used
	base.Engine.Resume = true
	if err := base.Apply(loaded.File, s.Workspace); err != nil {
		return base, loaded, err
	}
	base.Plugins.Config = loaded.File
	if names := base.Plugins.envNames; len(names) > 0 {
		base.Plugins.Env = tool.NewEnv(append(config.KeyVars(), loaded.File.EnvRefs...), append(slices.Clone(loaded.File.Agentd.ToolEnv), names...))
	}
	return base, loaded, nil
}
