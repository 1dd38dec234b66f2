package llm

import (
	"fmt"
	"sort"
	"sync"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/suggest"
)

// Model is what agentd knows of one model beyond how to reach it.
type Model struct {
	// Name is the provider's name for the model (often the client's id).
	Name string
	// Context and Output are the token limits (0: unknown).
	Context, Output int
	// Cost is the price per million tokens; nil means unknown (the
	// built-in price table is consulted).
	Cost *Price
	// Options are provider options sent with every call, and Variants
	// named sets of options a prompt may pick (opencode's keys).
	Options  map[string]any
	Variants map[string]map[string]any
	// Input is what the model takes besides text; nil when the
	// configuration does not say (Resolve then asks the built-in table
	// of known models, then the provider).
	Input *Modalities
}

// Price is a model's price in dollars per million tokens.
type Price struct {
	Input, Output, CacheRead, CacheWrite float64
}

// Cost returns the price of a call's usage.
func (p *Price) Cost(u Usage) float64 {
	if p == nil {
		return 0
	}
	return (float64(u.Input)*p.Input + float64(u.Output)*p.Output +
		float64(u.CacheRead)*p.CacheRead + float64(u.CacheWrite)*p.CacheWrite) / 1e6
}

// Registry maps provider ids to providers and the models they serve.
type Registry struct {
	mu        sync.RWMutex
	providers map[string]registered
	// unconfigured maps the providers agentd knows but that are not
	// enabled to what enables them.
	unconfigured map[string]string
	// setups are how providers are built (see Setup).
	setups map[string]Setup
}

type registered struct {
	p Provider
	// models maps the model id a client uses to what agentd knows of it;
	// nil accepts any model id as is, as does open (see AddModels).
	models map[string]Model
	open   bool
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{providers: make(map[string]registered)} }

// Add registers a provider with its models by client id; nil accepts any
// model id.
func (r *Registry) Add(providerID string, p Provider, models map[string]Model) {
	r.mu.Lock()
	r.providers[providerID] = registered{p: p, models: models}
	delete(r.unconfigured, providerID)
	r.mu.Unlock()
}

// Resolve implements the engine's model lookup: the provider and what
// agentd knows of the model (its provider-side name at least).
func (r *Registry) Resolve(ref core.ModelRef) (Provider, Model, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	reg, ok := r.providers[ref.ProviderID]
	if !ok {
		if fix, ok := r.unconfigured[ref.ProviderID]; ok {
			return nil, Model{}, fmt.Errorf("provider %q is not configured: %s", ref.ProviderID, fix)
		}
		known := r.providerIDs()
		for id := range r.unconfigured {
			known = append(known, id)
		}
		sort.Strings(known)
		return nil, Model{}, fmt.Errorf("unknown provider %q (%s)", ref.ProviderID, suggest.Hint(ref.ProviderID, known, 0))
	}
	var m Model
	if m, ok = reg.models[ref.ModelID]; !ok && (reg.models == nil || reg.open) {
		m = Model{Name: ref.ModelID}
	} else if !ok {
		known := make([]string, 0, len(reg.models))
		for id := range reg.models {
			known = append(known, id)
		}
		sort.Strings(known)
		return nil, Model{}, fmt.Errorf("provider %q has no model %q (%s)", ref.ProviderID, ref.ModelID, suggest.Hint(ref.ModelID, known, 20))
	}
	if m.Name == "" {
		m.Name = ref.ModelID
	}
	if m.Cost == nil {
		m.Cost = KnownPrice(m.Name)
	}
	if m.Context == 0 {
		if lim, ok := knownLimits[m.Name]; ok {
			m.Context, m.Output = lim[0], lim[1]
		}
	}
	if m.Input == nil {
		m.Input = inputOf(reg.p, m.Name)
	}
	return reg.p, m, nil
}

// Unconfigured records a provider agentd could speak to but that is not
// enabled, with the sentence that says how to enable it: a model that
// names it is refused with that sentence.
func (r *Registry) Unconfigured(providerID, fix string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.markUnconfigured(providerID, fix)
}

// markUnconfigured is Unconfigured with r.mu held.
func (r *Registry) markUnconfigured(providerID, fix string) {
	if r.unconfigured == nil {
		r.unconfigured = map[string]string{}
	}
	r.unconfigured[providerID] = fix
}

// Providers lists the registered provider ids.
func (r *Registry) Providers() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.providerIDs()
}

func (r *Registry) providerIDs() []string {
	var out []string
	for id := range r.providers {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}
