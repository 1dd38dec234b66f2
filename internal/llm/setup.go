package llm

import (
	"net/http"
	"time"
)

// Conn is how a provider is reached: what the configuration gives it.
type Conn struct {
	BaseURL string
	APIKey  string
	Headers map[string]string
	Timeout time.Duration
	// HTTPClient carries the provider's requests (nil: HTTPClient); a
	// plugin's auth loader puts its fetch here.
	HTTPClient *http.Client
}

// Setup is how a registered provider was built, kept so that a layer in
// front of it (a plugin's auth loader) can build it again with its own key,
// address, headers and HTTP client.
type Setup struct {
	Conn  Conn
	Build func(Conn) Provider
	// Missing says how to give the provider a key when it has none.
	Missing string
}

// SetSetup records how provider id is built (configured or not).
func (r *Registry) SetSetup(id string, s Setup) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.setups == nil {
		r.setups = map[string]Setup{}
	}
	r.setups[id] = s
}

// SetupOf returns how provider id is built; false when unknown.
func (r *Registry) SetupOf(id string) (Setup, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	s, ok := r.setups[id]
	return s, ok
}

// Replace changes provider id: fn gets its provider (nil when it is only
// known as unconfigured) and its models (nil: any model id) and returns
// the ones to register. It reports false, calling nothing, for a provider
// the registry does not know at all.
func (r *Registry) Replace(id string, fn func(p Provider, models map[string]Model) (Provider, map[string]Model)) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	reg, ok := r.providers[id]
	_, unconfigured := r.unconfigured[id]
	_, setup := r.setups[id]
	if !ok && !unconfigured && !setup {
		return false
	}
	p, models := fn(reg.p, reg.models)
	r.providers[id] = registered{p: p, models: models, open: reg.open}
	delete(r.unconfigured, id)
	return true
}

// Lookup returns provider id and its models (nil: any model id); false
// when it is not registered.
func (r *Registry) Lookup(id string) (Provider, map[string]Model, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	reg, ok := r.providers[id]
	return reg.p, reg.models, ok
}

// AddModels adds models to provider id (a plugin's provider hook), the
// provider's own kept where both name one; a provider that took any model
// id still does. False when it is not registered.
func (r *Registry) AddModels(id string, add map[string]Model) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	reg, ok := r.providers[id]
	if !ok {
		return false
	}
	next := make(map[string]Model, len(reg.models)+len(add))
	for k, v := range add {
		next[k] = v
	}
	for k, v := range reg.models {
		next[k] = v
	}
	reg.open = reg.open || reg.models == nil
	reg.models = next
	r.providers[id] = reg
	return true
}

// Disable takes provider id out (the stored key that alone enabled it
// was forgotten): a model that names it is refused with fix again. Its
// setup is kept, so that a new key can enable it again.
func (r *Registry) Disable(id, fix string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.providers, id)
	r.markUnconfigured(id, fix)
}
