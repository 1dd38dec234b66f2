package app

import (
	"context"
	"path/filepath"

	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/events"
	"github.com/agentd/agentd/internal/pty"
	"github.com/agentd/agentd/internal/sandbox"
)

// Terminals are the operator's terminal settings (agentd.terminal): off
// unless Enabled.
type Terminals struct {
	Enabled bool
	// Shell is the default program; Max bounds the terminals kept at
	// once (0: pty's defaults).
	Shell string
	Max   int
}

// terminalsFrom returns the terminals the operator's files ask for. A
// project's agentd.json, which the model can write, cannot turn them on:
// its agentd.terminal is reported ignored, as its agentd.sandbox is.
func terminalsFrom(s Setup, loaded *config.Loaded) Terminals {
	project := ""
	if s.Workspace != "" {
		project = filepath.Join(s.Workspace, "agentd.json")
	}
	var tm *config.Terminal
	for i, f := range loaded.Files {
		if f.Agentd.Terminal == nil {
			continue
		}
		if loaded.Used[i] == project && !sameFile(project, s.ConfigFile) {
			loaded.Warnings = append(loaded.Warnings, config.Problem{File: project, Key: "agentd.terminal",
				Msg: "only the operator's files (the global agentd.json, --config) turn terminals on, not the project's"})
			continue
		}
		tm = f.Agentd.Terminal
	}
	if tm == nil {
		return Terminals{}
	}
	return Terminals{Enabled: tm.Enabled, Shell: tm.Shell, Max: tm.Max}
}

// terminals are a node's terminals (nil when off; Stop takes nil).
type terminals = pty.Manager

// startTerminals starts the node's terminals when the operator turned
// them on (nil otherwise): confined by the node's sandbox, with the tools'
// environment and containers, announcing themselves on the event hub. A
// system that cannot run them says so and serves without.
func startTerminals(ctx context.Context, cfg Config, sb *sandbox.Sandbox, hub *events.Hub) *pty.Manager {
	if !cfg.Terminals.Enabled {
		return nil
	}
	m := pty.New(pty.Config{
		Shell: cfg.Terminals.Shell, Max: cfg.Terminals.Max, Env: cfg.Engine.ToolEnv, Sandbox: sb,
		Scope: cfg.Engine.ToolScope, Logger: cfg.Logger,
		Notify: func(typ string, props any) { hub.PublishLive(core.MustEvent("", typ, props)) },
	})
	if err := m.Start(ctx); err != nil {
		cfg.Logger.Error("terminals are on but cannot run here; serving without", "err", err)
		return nil
	}
	if sb == nil {
		cfg.Logger.Warn("terminals are on and the sandbox is not: a terminal's shell can change everything the server's user can")
	} else {
		cfg.Logger.Info("terminals are on: each is a shell for whoever can reach the API, confined like the model's commands")
	}
	return m
}

// terminalService is m as the API's service, nil (terminals off) when m
// is.
func terminalService(m *pty.Manager) pty.Service {
	if m == nil {
		return nil
	}
	return m
}
