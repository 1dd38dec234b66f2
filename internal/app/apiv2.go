package app

import (
	"github.com/agentd/agentd/internal/apiv2"
	"github.com/agentd/agentd/internal/command"
	"github.com/agentd/agentd/internal/engine"
	"github.com/agentd/agentd/internal/events"
	"github.com/agentd/agentd/internal/server"
	"github.com/agentd/agentd/internal/store"
)

// mountV2 serves opencode 2's API (/api/*) beside the v1 routes, behind
// the same middleware, over the same engine, store and event log.
func mountV2(api *server.Server, st *store.Watched, eng *engine.Engine, hub *events.Hub, cfg Config, commands *command.Catalog) {
	v2 := apiv2.New(st, eng, hub, apiv2.Config{
		Version: cfg.Version, Directory: cfg.Directory, Catalog: *cfg.Catalog, Commands: commands,
		Files: api.Files(), Heartbeat: cfg.Heartbeat, Unhealthy: st.Lost, Logger: cfg.Logger,
	})
	api.Mount(v2.Routes()...)
}
