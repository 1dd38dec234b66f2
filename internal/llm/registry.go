package llm

import (
	"fmt"
	"sort"
	"sync"

	"github.com/agentd/agentd/internal/core"
)

// Registry maps provider ids to providers and the models they serve.
type Registry struct {
	mu        sync.RWMutex
	providers map[string]registered
}

type registered struct {
	p Provider
	// models maps the model id a client uses to the provider's name for it;
	// nil accepts any model id as is.
	models map[string]string
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{providers: make(map[string]registered)} }

// Add registers a provider. models maps client model ids to provider model
// names; nil accepts any model id.
func (r *Registry) Add(providerID string, p Provider, models map[string]string) {
	r.mu.Lock()
	r.providers[providerID] = registered{p: p, models: models}
	r.mu.Unlock()
}

// Resolve implements the engine's model lookup.
func (r *Registry) Resolve(ref core.ModelRef) (Provider, string, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	reg, ok := r.providers[ref.ProviderID]
	if !ok {
		return nil, "", fmt.Errorf("unknown provider %q", ref.ProviderID)
	}
	if reg.models == nil {
		return reg.p, ref.ModelID, nil
	}
	name, ok := reg.models[ref.ModelID]
	if !ok {
		return nil, "", fmt.Errorf("provider %q has no model %q", ref.ProviderID, ref.ModelID)
	}
	return reg.p, name, nil
}

// Providers lists the registered provider ids.
func (r *Registry) Providers() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []string
	for id := range r.providers {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}
