package plugin

import (
	"context"
	"encoding/json"
	"slices"
	"sort"

	"github.com/agentd/agentd/internal/llm"
)

// ProviderModels are a provider's models after the plugins' provider
// hooks (Models), or a provider that a plugin's auth loader serves and
// that a stored credential enables (Enabled), for the providers' list.
type ProviderModels struct {
	ID      string
	Enabled bool
	// Loader says that a plugin's auth loader serves the provider.
	Loader bool
	// Models is nil when no provider hook named the provider.
	Models []ModelInfo
}

// ModelInfo is one model a provider hook gave.
type ModelInfo struct {
	ID, Name        string
	Context, Output int
}

// SetUpProviders does at start what opencode does when it sets up its
// providers, with the plugins of dir (the server's directory): each
// provider a plugin's auth loader serves gets it in front (see
// authProvider), then each provider a provider hook names gets the models
// the hook returns (a stock provider a login enables is known by then),
// in reg. It returns what the providers' list must say.
func (h *Host) SetUpProviders(ctx context.Context, dir string, reg *llm.Registry) ([]ProviderModels, error) {
	info, err := h.DescribeAuth(ctx, dir)
	if err != nil {
		return nil, err
	}
	var out []ProviderModels
	ids := make([]string, 0, len(info.Auth))
	for id, a := range info.Auth {
		if a.Loader {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		setup, ok := reg.SetupOf(id)
		if !ok || setup.Build == nil {
			h.log.Warn("a plugin logs in to a provider agentd does not know (configure it under provider)", "provider", id)
			continue
		}
		configured := false
		reg.Replace(id, func(p llm.Provider, models map[string]llm.Model) (llm.Provider, map[string]llm.Model) {
			configured = p != nil
			return &authProvider{h: h, id: id, dir: dir, setup: setup, base: p, reg: reg}, models
		})
		pm := ProviderModels{ID: id, Loader: true}
		if c := h.credentials(); !configured && c != nil {
			_, pm.Enabled = c.Auth(id)
		}
		out = append(out, pm)
	}
	// After the logins, so that a stock provider a login enables is known.
	for _, id := range info.Providers {
		models, err := h.providerModels(ctx, dir, id, reg)
		if err != nil {
			return out, err
		}
		if models != nil {
			out = append(out, ProviderModels{ID: id, Models: models})
		}
	}
	return out, nil
}

// ServedByLoader reports whether p is a provider that a plugin's auth
// loader serves (SetUpProviders put it in front).
func ServedByLoader(p llm.Provider) bool {
	_, ok := p.(*authProvider)
	return ok
}

// LoginOnly reports whether p is a provider that only a plugin's login
// enables: a loader's provider that nothing configures.
func LoginOnly(p llm.Provider) bool {
	ap, ok := p.(*authProvider)
	return ok && ap.base == nil
}

// RefreshProvider does again for provider id, whose stored credential
// changed kind, what SetUpProviders did for it at start with the plugins
// of dir: whether a stored login enables it (a loader's provider that
// nothing else configures) and the models its provider hooks return with
// the credential as it is now. The loader itself runs at the provider's
// next call, as always. Models is nil when no provider hook names it.
func (h *Host) RefreshProvider(ctx context.Context, dir, id string, reg *llm.Registry) (ProviderModels, error) {
	out := ProviderModels{ID: id}
	info, err := h.DescribeAuth(ctx, dir)
	if err != nil {
		return out, err
	}
	p, _, _ := reg.Lookup(id)
	if ap, ok := p.(*authProvider); ok && info.Auth[id].Loader {
		out.Loader = true
		if c := h.credentials(); ap.base == nil && c != nil {
			_, out.Enabled = c.Auth(id)
		}
	}
	if slices.Contains(info.Providers, id) {
		out.Models, err = h.providerModels(ctx, dir, id, reg)
	}
	return out, err
}

// providerModels calls the provider hooks for provider id and registers
// the models they return (the configuration's own models kept over them,
// as opencode merges its configuration last); nil when the registry does
// not know the provider.
func (h *Host) providerModels(ctx context.Context, dir, id string, reg *llm.Registry) ([]ModelInfo, error) {
	_, models, known := reg.Lookup(id)
	if !known {
		h.log.Warn("a plugin's provider hook names a provider agentd does not know", "provider", id)
		return nil, nil
	}
	var auth json.RawMessage
	if c := h.credentials(); c != nil {
		auth, _ = c.Auth(id)
	}
	var res struct {
		Models map[string]hookModel `json:"models"`
	}
	err := h.call(ctx, dir, "provider.models", h.opts.Timeout, map[string]any{"provider": id, "info": providerInfo(id, models), "auth": auth}, &res)
	if err != nil {
		return nil, err
	}
	next := map[string]llm.Model{}
	var out []ModelInfo
	for mid, m := range res.Models {
		lm := llm.Model{Name: m.API.ID, Context: m.Limit.Context, Output: m.Limit.Output}
		if lm.Name == "" {
			lm.Name = mid
		}
		if c := m.Cost; c != nil {
			lm.Cost = &llm.Price{Input: c.Input, Output: c.Output, CacheRead: c.Cache.Read, CacheWrite: c.Cache.Write}
		}
		next[mid] = lm
		name := m.Name
		if name == "" {
			name = mid
		}
		out = append(out, ModelInfo{ID: mid, Name: name, Context: m.Limit.Context, Output: m.Limit.Output})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	reg.AddModels(id, next)
	return out, nil
}

// hookModel is what agentd reads of a model a provider hook returns
// (opencode's Model).
type hookModel struct {
	Name string `json:"name"`
	API  struct {
		ID string `json:"id"`
	} `json:"api"`
	Limit struct {
		Context int `json:"context"`
		Output  int `json:"output"`
	} `json:"limit"`
	Cost *struct {
		Input  float64 `json:"input"`
		Output float64 `json:"output"`
		Cache  struct {
			Read  float64 `json:"read"`
			Write float64 `json:"write"`
		} `json:"cache"`
	} `json:"cost"`
}
