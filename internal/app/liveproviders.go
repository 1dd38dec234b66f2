package app

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/credential"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/plugin"
	"github.com/agentd/agentd/internal/server"
)

// liveProviders is the providers' list (GET /provider, /config/providers)
// following the credential store: what the configuration enables, plus
// what a stored credential enables (a plugin's login, or a key for a
// stock provider nothing else enables) with the plugins' provider hooks'
// models. When a provider's kind of credential changes (a login, a key
// stored or forgotten, on this node) it does again for that provider
// what start-up does, once; a request only reads the list.
type liveProviders struct {
	h     *plugin.Host // nil without plugins
	reg   *llm.Registry
	creds *credential.Store // nil: none
	dir   string
	log   *slog.Logger
	// base is the list as configured; configured names its providers.
	base       []server.Provider
	configured map[string]bool

	mu      sync.Mutex // one set-up at a time
	overlay map[string]overlay
	keyed   map[string]bool // stock providers a stored key enabled
	list    atomic.Pointer[[]server.Provider]
	stop    func()
}

// overlay is what a stored credential and the plugins make of one provider.
type overlay struct {
	enabled bool
	source  string
	models  []plugin.ModelInfo // nil: no provider hook names it
}

// startProviders sets the providers up as opencode does with its
// plugins' auth and provider hooks and the stored credentials, and
// follows the store from then on (stop ends that).
func startProviders(ctx context.Context, h *plugin.Host, cfg *Config) *liveProviders {
	// Opened here when nothing did yet; mountV2 logs a store that cannot be.
	_, _ = cfg.credentialKeys()
	l := &liveProviders{h: h, reg: cfg.Models, creds: cfg.Credentials, dir: cfg.Directory, log: cfg.Logger,
		base: append([]server.Provider{}, cfg.Catalog.Providers...), configured: map[string]bool{},
		overlay: map[string]overlay{}, keyed: map[string]bool{}}
	for _, p := range l.base {
		l.configured[p.ID] = true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	loaders := map[string]bool{}
	if h != nil {
		got, err := h.SetUpProviders(ctx, cfg.Directory, cfg.Models)
		if err != nil {
			cfg.Logger.Error("plugins: provider set-up", "err", err)
		}
		for _, pm := range got {
			o := l.overlay[pm.ID]
			o.source = "custom"
			o.enabled = o.enabled || pm.Enabled
			if pm.Models != nil {
				o.models = pm.Models
			}
			l.overlay[pm.ID] = o
			loaders[pm.ID] = loaders[pm.ID] || pm.Loader
		}
	}
	if l.creds != nil {
		for _, id := range l.creds.IDs() {
			if _, stock := config.StockKind(id); stock && !loaders[id] && !l.configured[id] {
				l.refreshLocked(ctx, id)
			}
		}
		// The refresh outlives the start's context, as the server does.
		bg := context.WithoutCancel(ctx)
		l.stop = l.creds.Watch(func(c credential.Change) { l.refresh(bg, c.ID) })
	}
	l.publish()
	return l
}

// Stop stops following the store.
func (l *liveProviders) Stop() {
	if l != nil && l.stop != nil {
		l.stop()
	}
}

// Providers is the list as it is now.
func (l *liveProviders) Providers() []server.Provider { return *l.list.Load() }

// refresh does again for provider id what start-up does, with the
// credential as the store holds it now.
func (l *liveProviders) refresh(ctx context.Context, id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refreshLocked(ctx, id)
	l.publish()
	l.log.Info("providers: a stored credential changed", "provider", id, "listed", l.configured[id] || l.overlay[id].enabled)
}

// refreshLocked is refresh under l.mu, without publishing: the stored
// key first (so that the hooks see the provider it enables), then the
// plugins' logins and hooks.
func (l *liveProviders) refreshLocked(ctx context.Context, id string) {
	p, _, _ := l.reg.Lookup(id)
	keyed := !plugin.ServedByLoader(p) && l.stockKey(id)
	pm := plugin.ProviderModels{ID: id}
	if l.h != nil {
		var err error
		if pm, err = l.h.RefreshProvider(ctx, l.dir, id, l.reg); err != nil {
			l.log.Error("plugins: provider set-up after a login", "provider", id, "err", err)
		}
	}
	o := overlay{enabled: pm.Enabled, source: "custom", models: pm.Models}
	if keyed {
		o.enabled, o.source = true, "api"
	}
	l.overlay[id] = o
}

// stockKey enables stock provider id (openai, anthropic) with its stored
// key when nothing else enables it, or takes it out again when the key is
// gone; it reports whether the key enables it.
func (l *liveProviders) stockKey(id string) bool {
	if _, ok := config.StockKind(id); !ok || l.configured[id] || l.creds == nil {
		return false
	}
	setup, ok := l.reg.SetupOf(id)
	if !ok || setup.Build == nil {
		return false
	}
	if key, _ := l.creds.Key(id); key != "" {
		if !l.keyed[id] {
			keys := func(id string) string { k, _ := l.creds.Key(id); return k }
			l.keyed[id] = l.reg.Replace(id, func(llm.Provider, map[string]llm.Model) (llm.Provider, map[string]llm.Model) {
				return config.StoredKeyProvider(id, keys, setup), nil
			})
		}
		return l.keyed[id]
	}
	if l.keyed[id] {
		l.reg.Disable(id, setup.Missing)
		delete(l.keyed, id)
	}
	return false
}

// publish makes the list from the configuration's and the overlays.
func (l *liveProviders) publish() {
	out := make([]server.Provider, 0, len(l.base)+len(l.overlay))
	for _, p := range l.base {
		p.Models = append([]server.Model{}, p.Models...)
		out = append(out, p)
	}
	ids := make([]string, 0, len(l.overlay))
	for id := range l.overlay {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		o := l.overlay[id]
		i := -1
		for j := range out {
			if out[j].ID == id {
				i = j
			}
		}
		if i < 0 {
			if p, _, ok := l.reg.Lookup(id); !o.enabled && (!ok || plugin.LoginOnly(p)) {
				continue // a hook's models for a provider nothing enables
			}
			out = append(out, newListed(id, o.source))
			i = len(out) - 1
		}
		out[i].Models = mergeModels(out[i].Models, o.models)
	}
	l.list.Store(&out)
}

// newListed is the list's entry for a provider that only a stored
// credential enables.
func newListed(id, source string) server.Provider {
	p := server.Provider{ID: id, Name: id, Source: source}
	if k, ok := config.StockKind(id); ok {
		p.Name, p.NPM, p.Env = k.Name, k.NPM[len(k.NPM)-1], []string{k.KeyEnv}
	}
	return p
}

// mergeModels adds the hooks' models to a provider's, its own kept.
func mergeModels(have []server.Model, add []plugin.ModelInfo) []server.Model {
	for _, m := range add {
		known := false
		for _, h := range have {
			known = known || h.ID == m.ID
		}
		if !known {
			have = append(have, server.Model{ID: m.ID, Name: m.Name, Context: m.Context, Output: m.Output})
		}
	}
	sort.Slice(have, func(a, b int) bool { return have[a].ID < have[b].ID })
	return have
}
