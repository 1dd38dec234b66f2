package config

import (
	"context"
	"sync"

	"github.com/agentd/agentd/internal/llm"
)

// keyed is a provider configured without a key: each request asks the
// credential store for one and uses a client built with it, rebuilt when
// the stored key changes (none stored: the client without a key, as
// configured).
type keyed struct {
	id    string
	keys  func(providerID string) string
	build func(key string) llm.Provider
	// missing is how to give the provider a key when it needs one
	// (Provider.MissingKey); "" when it can go without.
	missing string

	mu  sync.Mutex
	key string
	p   llm.Provider
}

// Stream implements llm.Provider.
func (k *keyed) Stream(ctx context.Context, req llm.Request, emit func(llm.Event) error) error {
	key := k.keys(k.id)
	if key == "" && k.missing != "" {
		// Sent without one, the provider's answer (a 401) would not say
		// where the key goes.
		return &llm.APIError{Message: k.missing, Auth: true}
	}
	k.mu.Lock()
	if k.p == nil || key != k.key {
		k.p, k.key = k.build(key), key
	}
	p := k.p
	k.mu.Unlock()
	return p.Stream(ctx, req, emit)
}

// StoredKeyProvider is a stock provider (StockKind) that only a key a
// client stored enables: built as s says, with the key keys gives at
// each request.
func StoredKeyProvider(id string, keys func(string) string, s llm.Setup) llm.Provider {
	return &keyed{id: id, keys: keys, missing: s.Missing, build: func(key string) llm.Provider {
		c := s.Conn
		c.APIKey = key
		return s.Build(c)
	}}
}
