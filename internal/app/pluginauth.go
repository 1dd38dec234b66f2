package app

import (
	"encoding/json"

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
