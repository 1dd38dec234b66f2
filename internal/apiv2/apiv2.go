// Package apiv2 is opencode 2's API — the /api/* routes, the v2.*
// operations of opencode's OpenAPI document and its later schema — as a
// second dialect over agentd's one record: the same sessions, runs,
// messages, parts, permission and question requests and event log the v1
// routes (package server) serve. It holds no state of its own and runs
// nothing: prompts, aborts, waits, reverts and answers go to the engine,
// reads to the store, and its event streams translate the one durable log
// (same seq) into opencode 2's events (translate.go). The server mounts
// its routes (Routes), so they pass through the same middleware as the
// v1 routes: authentication, origin checks, body limits, the access log.
//
// Where opencode 1.18.33's document and opencode 2's later schema
// differ, the later one is served; docs/ARCHITECTURE.md lists each
// difference.
package apiv2

import (
	"context"
	"log/slog"
	"time"

	"github.com/agentd/agentd/internal/access"
	"github.com/agentd/agentd/internal/command"
	"github.com/agentd/agentd/internal/engine"
	"github.com/agentd/agentd/internal/events"
	"github.com/agentd/agentd/internal/pty"
	"github.com/agentd/agentd/internal/server"
	"github.com/agentd/agentd/internal/skill"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/workspace"
)

// Files is how the file routes read a directory: with the checks and the
// operator's read rules the v1 file routes apply (server.FileAccess).
type Files interface {
	// Dir checks a directory ("" for the server's own) and returns it as
	// read; workspace.ErrDenied when the operator's rules deny reading it.
	Dir(dir string) (string, error)
	List(dir, p string) ([]workspace.Entry, error)
	Find(ctx context.Context, dir, query string, dirs bool, typ string, limit int) ([]workspace.Entry, error)
	Read(dir, p string, limit int64) ([]byte, string, error)
}

// Credentials keeps the providers' keys a client gives (opencode's
// integrations); see package credential.
type Credentials interface {
	// Key returns a provider's stored key and its label ("" when none).
	Key(providerID string) (key, label string)
	// Set stores (or replaces) a provider's key.
	Set(providerID, key, label string) error
	// Label renames a stored key; false when there is none.
	Label(providerID, label string) (bool, error)
	// Remove forgets a provider's key; false when there was none.
	Remove(providerID string) (bool, error)
}

// Config configures the API.
type Config struct {
	Version string
	// Directory is the default workspace of new sessions.
	Directory string
	// Catalog is what the server tells clients about its models and
	// agents; Commands resolve a directory's commands.
	Catalog server.Catalog
	// LiveProviders, when set, gives the providers at each request in
	// place of Catalog.Providers (the logins clients store).
	LiveProviders func() []server.Provider
	Commands      *command.Catalog
	Files         Files
	// Skills resolve a directory's skills (nil: none).
	Skills *skill.Catalog
	// Credentials stores the keys of API-key integrations (nil: none can
	// be connected).
	Credentials Credentials
	// Terminals is the terminal service the v1 /pty routes serve too (nil:
	// the operator has not turned terminals on, and every /api/pty route
	// answers 403).
	Terminals pty.Service
	// Heartbeat is the interval of the event streams' heartbeats
	// (default 10 s).
	Heartbeat time.Duration
	// Unhealthy says why the node cannot serve (nil while it can).
	Unhealthy func() error
	Logger    *slog.Logger
	// Callbacks keeps prompts' callbackUrl (nil: a prompt that carries
	// one is refused).
	Callbacks server.Callbacks
	// Keys are the API keys: what a request's key may see (nil: no keys,
	// every request sees everything).
	Keys *access.Keys
}

// API serves opencode 2's routes.
type API struct {
	st  store.Store
	eng *engine.Engine
	hub *events.Hub
	cfg Config
	log *slog.Logger
}

// New builds the API over a started engine.
func New(st store.Store, eng *engine.Engine, hub *events.Hub, cfg Config) *API {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Commands == nil {
		cfg.Commands = &command.Catalog{}
	}
	return &API{st: st, eng: eng, hub: hub, cfg: cfg, log: cfg.Logger.With("component", "apiv2")}
}
