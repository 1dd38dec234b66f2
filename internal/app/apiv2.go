package app

import (
	"os"
	"path/filepath"

	"github.com/agentd/agentd/internal/access"
	"github.com/agentd/agentd/internal/apiv2"
	"github.com/agentd/agentd/internal/command"
	"github.com/agentd/agentd/internal/credential"
	"github.com/agentd/agentd/internal/engine"
	"github.com/agentd/agentd/internal/events"
	"github.com/agentd/agentd/internal/pty"
	"github.com/agentd/agentd/internal/server"
	"github.com/agentd/agentd/internal/skill"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/webhook"
)

// mountV2 serves opencode 2's API (/api/*) beside the v1 routes, behind
// the same middleware, over the same engine, store and event log; the
// credential store's v1 routes (/auth/{id}); and the webhooks' (/webhook).
// terms are the terminals the v1 /pty routes serve (nil while off); keys
// are the API keys.
func mountV2(api *server.Server, st *store.Watched, eng *engine.Engine, hub *events.Hub, cfg Config, commands *command.Catalog, skills *skill.Catalog,
	terms pty.Service, hooks *webhook.Service, keys *access.Keys) {
	v2cfg := apiv2.Config{
		Version: cfg.Version, Directory: cfg.Directory, Catalog: *cfg.Catalog, LiveProviders: api.Providers, Commands: commands, Skills: skills,
		Files: api.Files(), Heartbeat: cfg.Heartbeat, Unhealthy: st.Lost, Logger: cfg.Logger, Terminals: terms, Keys: keys,
		Callbacks: callbacksOf(hooks),
	}
	if hooks != nil {
		api.Mount(hooks.Routes()...)
	}
	if _, err := cfg.credentialKeys(); err != nil {
		// Configure opened it when a configuration was read; an embedder
		// that gave none runs without one.
		cfg.Logger.Error("credentials: keys given by clients cannot be kept", "err", err)
	}
	if cfg.Credentials != nil {
		v2cfg.Credentials = cfg.Credentials
		api.Mount(cfg.Credentials.Routes()...)
	}
	api.Mount(apiv2.New(st, eng, hub, v2cfg).Routes()...)
}

// CredentialsFile is where the keys clients give are kept: beside the
// SQLite database; for a shared PostgreSQL database, which keeps them
// itself, the file in agentd's configuration directory that a node
// imports at start (where earlier versions kept each node's own).
func CredentialsFile(dbPath string) string {
	if !IsPostgres(dbPath) {
		return dbPath + ".credentials.json"
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "agentd", "credentials.json")
}

// credentialKeys opens the credential store (once) and returns what the
// providers configured without a key ask for theirs; nil without a
// database to keep it beside.
func (c *Config) credentialKeys() (func(string) string, error) {
	if c.Credentials == nil && c.DBPath != "" {
		s, err := credential.Open(c.credentialsPath())
		if err != nil {
			return nil, err
		}
		c.Credentials = s
	}
	if c.Credentials == nil {
		return nil, nil
	}
	s := c.Credentials
	return func(id string) string { key, _ := s.Key(id); return key }, nil
}

// credentialsPath is the credential file: CredentialsFile unless the
// configuration names one.
func (c *Config) credentialsPath() string {
	if c.CredentialsFile != "" {
		return c.CredentialsFile
	}
	return CredentialsFile(c.DBPath)
}
