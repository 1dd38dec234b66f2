package app

import (
	"encoding/json"
	"sort"

	"github.com/agentd/agentd/internal/agent"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/llm/scripted"
	"github.com/agentd/agentd/internal/permission"
	"github.com/agentd/agentd/internal/server"
)

// scriptedProvider describes the built-in offline model.
func scriptedProvider() server.Provider {
	return server.Provider{ID: scripted.ProviderID, Name: "agentd", Source: "custom",
		Models: []server.Model{{ID: scripted.ModelID, Name: "Scripted (offline)", Image: true, PDF: true}}}
}

// Catalog describes a configuration to opencode's clients: its providers
// and models, the default model, the agents, and the configuration itself
// in opencode's shape with secrets left out.
func Catalog(f config.File, def core.ModelRef, rules []core.Rule, agents []agent.Agent) server.Catalog {
	c := server.Catalog{Default: def, Providers: []server.Provider{scriptedProvider()}}
	view := map[string]any{"share": "disabled", "autoupdate": false}
	provView := map[string]any{}
	providers := f.Providers()
	ids := make([]string, 0, len(providers))
	for id := range providers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		p := providers[id]
		sp := server.Provider{ID: id, Name: p.Name, Source: "config", NPM: p.NPM, BaseURL: p.Options.BaseURL}
		if sp.Name == "" {
			sp.Name = id
		}
		if p.FromEnv != "" {
			sp.Source, sp.Env = "env", []string{p.FromEnv}
		}
		models := map[string]any{}
		for mid, m := range p.Models {
			name := m.Name
			if name == "" {
				name = mid
			}
			in := m.Input(mid)
			sp.Models = append(sp.Models, server.Model{ID: mid, Name: name, Context: m.Limit.Context, Output: m.Limit.Output,
				Image: in.Image, PDF: in.PDF})
			mv := map[string]any{"name": name}
			if m.Limit.Context > 0 && m.Limit.Output > 0 {
				mv["limit"] = map[string]int{"context": m.Limit.Context, "output": m.Limit.Output}
			}
			if m.Attachment != nil {
				mv["attachment"] = *m.Attachment
			}
			if md := m.Modalities; md != nil {
				mv["modalities"] = map[string][]string{"input": append([]string{}, md.Input...), "output": append([]string{}, md.Output...)}
			}
			models[mid] = mv
		}
		// A provider that takes any model id still offers the default.
		if len(p.Models) == 0 && def.ProviderID == id {
			in, _ := llm.KnownInput(def.ModelID)
			sp.Models = append(sp.Models, server.Model{ID: def.ModelID, Name: def.ModelID, Image: in.Image, PDF: in.PDF})
		}
		sort.Slice(sp.Models, func(i, j int) bool { return sp.Models[i].ID < sp.Models[j].ID })
		c.Providers = append(c.Providers, sp)
		if p.FromEnv == "" {
			pv := map[string]any{"name": sp.Name, "models": models}
			if p.NPM != "" {
				pv["npm"] = p.NPM
			}
			if p.Options.BaseURL != "" {
				pv["options"] = map[string]any{"baseURL": p.Options.BaseURL}
			}
			provView[id] = pv
		}
	}
	if len(provView) > 0 {
		view["provider"] = provView
	}
	view["model"] = def.ProviderID + "/" + def.ModelID
	if f.SmallModel != "" {
		view["small_model"] = f.SmallModel
	}
	if len(f.Permission) > 0 {
		view["permission"] = json.RawMessage(f.Permission)
	}
	c.Config = view
	for _, a := range agents {
		perm := append(permission.Defaults(), rules...)
		c.Agents = append(c.Agents, server.Agent{Name: a.Name, Description: a.Description, Mode: a.Mode,
			Native: a.Native, Hidden: a.Hidden, Permission: append(perm, a.Permission...), Prompt: a.Prompt,
			Model: a.Model, Steps: a.Steps})
	}
	return c
}
