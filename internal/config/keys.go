package config

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/agentd/agentd/internal/llm"
)

// MissingKey says how to give a provider the key it needs, or "" when it
// has one or needs none: a local OpenAI-compatible server (its own
// baseURL) needs none, OpenAI itself and Anthropic do. A key a client
// stores (PUT /auth/:id) is not seen here; the sentence says so.
func (p Provider) MissingKey(id string) string {
	kind, ok := kindOf(id, p.NPM)
	if !ok || p.Options.APIKey != "" {
		return ""
	}
	for h := range p.Options.Headers {
		switch strings.ToLower(h) {
		case "authorization", "x-api-key", "api-key":
			return ""
		}
	}
	if kind.Stock == "openai" && p.Options.BaseURL != "" {
		return "" // a server of the operator's, which may want no key
	}
	env := ""
	if kind.KeyEnv != "" && id == kind.Stock {
		if os.Getenv(kind.KeyEnv) != "" {
			return ""
		}
		env = kind.KeyEnv + ", or "
	}
	return fmt.Sprintf("provider %s has no API key: set %sprovider.%s.options.apiKey in agentd.json (\"{env:VAR}\" reads a variable), or store one with PUT /auth/%s",
		id, env, id, id)
}

// KeyProblems lists, one sentence each, the configured providers that
// have no key and need one (MissingKey), sorted by provider.
func (f File) KeyProblems() []string {
	var out []string
	for id, p := range f.Provider {
		if m := p.MissingKey(id); m != "" {
			out = append(out, m)
		}
	}
	sort.Strings(out)
	return out
}

// unconfigured tells the registry how to enable each stock provider that
// is not enabled, so that a model naming one says which key to set.
func (f File) unconfigured(reg *llm.Registry) {
	have := f.Providers()
	for _, k := range Kinds {
		if _, ok := have[k.Stock]; ok || k.Stock == "" || k.KeyEnv == "" {
			continue
		}
		fix := fmt.Sprintf("set %s (its API key), add a provider.%s block with options.apiKey to agentd.json, or store a key with PUT /auth/%s", k.KeyEnv, k.Stock, k.Stock)
		reg.Unconfigured(k.Stock, fix)
		reg.SetSetup(k.Stock, llm.Setup{Build: k.New, Missing: fix})
	}
}
