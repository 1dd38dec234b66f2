package config

import (
	"os"
	"strings"

	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/llm/anthropic"
	"github.com/agentd/agentd/internal/llm/openai"
)

// Conn is how a configured provider is reached.
type Conn = llm.Conn

// Kind is one kind of provider agentd speaks: the npm packages
// opencode's configuration names it by, the stock provider that its key
// in the environment enables without any configuration, and how to build
// one.
type Kind struct {
	NPM []string
	// Stock is the provider id a key in KeyEnv enables ("" for none),
	// named Name.
	Stock, KeyEnv, Name string
	New                 func(Conn) llm.Provider
}

// Kinds are the provider kinds, the first the default for a provider
// whose block names no npm package. A new kind of provider is a package
// under internal/llm and one entry here.
var Kinds = []Kind{
	{NPM: []string{"@ai-sdk/openai-compatible", "@ai-sdk/openai"}, Stock: "openai", KeyEnv: "OPENAI_API_KEY", Name: "OpenAI",
		New: func(c Conn) llm.Provider {
			return openai.New(openai.Options{BaseURL: c.BaseURL, APIKey: c.APIKey, Headers: c.Headers, Timeout: c.Timeout,
				HTTPClient: c.HTTPClient})
		}},
	{NPM: []string{"@ai-sdk/anthropic"}, Stock: "anthropic", KeyEnv: "ANTHROPIC_API_KEY", Name: "Anthropic",
		New: func(c Conn) llm.Provider {
			return anthropic.New(anthropic.Options{BaseURL: c.BaseURL, APIKey: c.APIKey, Headers: c.Headers, Timeout: c.Timeout,
				HTTPClient: c.HTTPClient})
		}},
}

// KeyVars are the environment variables that hold providers' keys, which
// tools must not see.
func KeyVars() []string {
	var out []string
	for _, k := range Kinds {
		if k.KeyEnv != "" {
			out = append(out, k.KeyEnv)
		}
	}
	return out
}

// kindOf finds the kind of a provider: by its npm package, else by its id
// (a block for "anthropic" needs no npm), else the first.
func kindOf(id, npm string) (Kind, bool) {
	for _, k := range Kinds {
		for _, n := range k.NPM {
			if n == npm {
				return k, true
			}
		}
	}
	if npm != "" {
		return Kind{}, false
	}
	for _, k := range Kinds {
		if k.Stock == id {
			return k, true
		}
	}
	return Kinds[0], true
}

// supported lists the npm packages agentd speaks, for an error.
func supported() string {
	var all []string
	for _, k := range Kinds {
		all = append(all, k.NPM...)
	}
	return strings.Join(all, ", ")
}

// stock returns the stock providers that keys in the environment enable.
func stock() map[string]Provider {
	out := map[string]Provider{}
	for _, k := range Kinds {
		if k.Stock != "" && k.KeyEnv != "" && os.Getenv(k.KeyEnv) != "" {
			out[k.Stock] = Provider{NPM: k.NPM[len(k.NPM)-1], Name: k.Name, FromEnv: k.KeyEnv}
		}
	}
	return out
}

// StockKind is the kind whose stock provider is id; false when id is
// none's.
func StockKind(id string) (Kind, bool) {
	for _, k := range Kinds {
		if k.Stock != "" && k.Stock == id {
			return k, true
		}
	}
	return Kind{}, false
}
