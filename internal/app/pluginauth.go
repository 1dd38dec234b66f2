package app

import (
	"context"
	"encoding/json"
	"sort"

	"github.com/agentd/agentd/internal/credential"
	"github.com/agentd/agentd/internal/plugin"
	"github.com/agentd/agentd/internal/server"
)

// pluginCredentials is the credential store as the plugins read and
// write it: opencode's Auth objects.
type pluginCredentials struct{ s *credential.Store }

// Auth implements plugin.Credentials.
func (c pluginCredentials) Auth(id string) (json.RawMessage, bool) {
	e, ok := c.s.Get(id)
	if !ok {
		return nil, false
	}
	out := map[string]any{"type": e.Type}
	switch e.Type {
	case "oauth":
		out["refresh"], out["access"], out["expires"] = e.Refresh, e.Access, e.Expires
		if e.AccountID != "" {
			out["accountId"] = e.AccountID
		}
		if e.EnterpriseURL != "" {
			out["enterpriseUrl"] = e.EnterpriseURL
		}
	default:
		out["key"] = e.Key
		if len(e.Metadata) > 0 {
			out["metadata"] = e.Metadata
		}
	}
	b, err := json.Marshal(out)
	return b, err == nil
}

// SetAuth implements plugin.Credentials.
func (c pluginCredentials) SetAuth(id string, auth json.RawMessage) error {
	var e credential.Entry
	if err := json.Unmarshal(auth, &e); err != nil {
		return err
	}
	if e.Type != "oauth" {
		e.Label = "API key"
	}
	return c.s.Put(id, e)
}

// providerAuth is the plugins' provider logins for the server, nil
// without plugins.
func providerAuth(h *plugin.Host) server.ProviderAuth {
	if h == nil {
		return nil
	}
	return h
}

// pluginProviders sets the providers up as opencode does with its
// plugins' auth and provider hooks (plugin.Host.SetUpProviders) and shows
// what they changed in the providers' list. A plugin that fails here is
// logged; the providers stay as configured.
func pluginProviders(ctx context.Context, h *plugin.Host, cfg *Config) {
	if h == nil {
		return
	}
	got, err := h.SetUpProviders(ctx, cfg.Directory, cfg.Models)
	if err != nil {
		cfg.Logger.Error("plugins: provider set-up", "err", err)
	}
	for _, pm := range got {
		i := -1
		for j, p := range cfg.Catalog.Providers {
			if p.ID == pm.ID {
				i = j
			}
		}
		if i < 0 {
			cfg.Catalog.Providers = append(cfg.Catalog.Providers, server.Provider{ID: pm.ID, Name: pm.ID, Source: "custom"})
			i = len(cfg.Catalog.Providers) - 1
		}
		p := &cfg.Catalog.Providers[i]
		for _, m := range pm.Models {
			known := false
			for _, have := range p.Models {
				known = known || have.ID == m.ID
			}
			if !known {
				p.Models = append(p.Models, server.Model{ID: m.ID, Name: m.Name, Context: m.Context, Output: m.Output})
			}
		}
		sort.Slice(p.Models, func(a, b int) bool { return p.Models[a].ID < p.Models[b].ID })
	}
}
