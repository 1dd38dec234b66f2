// Package config reads agentd.json, whose provider keys follow opencode's
// so that an opencode provider block pasted in works unchanged, and turns it
// into the model registry the engine uses.
package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/llm/anthropic"
	"github.com/agentd/agentd/internal/llm/openai"
	"github.com/agentd/agentd/internal/llm/scripted"
)

// File is the content of agentd.json.
type File struct {
	Model      string              `json:"model"`
	SmallModel string              `json:"small_model"`
	Provider   map[string]Provider `json:"provider"`
	// Permission is opencode's permission config; see package permission.
	Permission json.RawMessage `json:"permission"`
	// Agentd holds agentd's own settings.
	Agentd Settings `json:"agentd"`
}

// Settings are agentd's own knobs.
type Settings struct {
	MaxSteps int    `json:"maxSteps"`
	Resume   *bool  `json:"resume"`
	Retry    *Retry `json:"retry"`
}

// Retry bounds provider retries.
type Retry struct {
	MaxAttempts int    `json:"maxAttempts"`
	MaxElapsed  string `json:"maxElapsed"`
}

// Provider is opencode's provider block.
type Provider struct {
	NPM     string           `json:"npm"`
	Name    string           `json:"name"`
	Options ProviderOptions  `json:"options"`
	Models  map[string]Model `json:"models"`
	// FromEnv names the variable whose key enabled a stock provider that
	// the configuration does not mention.
	FromEnv string `json:"-"`
}

// ProviderOptions are the connection settings of a provider.
type ProviderOptions struct {
	BaseURL string            `json:"baseURL"`
	APIKey  string            `json:"apiKey"`
	Headers map[string]string `json:"headers"`
	// Timeout is in milliseconds; false (or absent) means none.
	Timeout json.RawMessage `json:"timeout"`
}

// Model is one model of a provider.
type Model struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Limit struct {
		Context int `json:"context"`
		Output  int `json:"output"`
	} `json:"limit"`
}

var envRef = regexp.MustCompile(`\{env:([A-Za-z_][A-Za-z0-9_]*)\}`)

// Parse reads one configuration document, substituting {env:VAR}.
func Parse(data []byte) (File, error) {
	text := envRef.ReplaceAllStringFunc(string(data), func(m string) string {
		v := os.Getenv(envRef.FindStringSubmatch(m)[1])
		b, _ := json.Marshal(v)
		return string(b[1 : len(b)-1])
	})
	var f File
	dec := json.NewDecoder(strings.NewReader(text))
	if err := dec.Decode(&f); err != nil {
		return f, err
	}
	return f, nil
}

// Paths lists the configuration files agentd reads, lowest precedence
// first: the global one, the workspace's, and an explicit one.
func Paths(workspace, explicit string) []string {
	var out []string
	if d, err := os.UserConfigDir(); err == nil {
		out = append(out, filepath.Join(d, "agentd", "agentd.json"))
	}
	if workspace != "" {
		out = append(out, filepath.Join(workspace, "agentd.json"))
	}
	if explicit != "" {
		out = append(out, explicit)
	}
	return out
}

// Load reads and merges the files that exist; a missing explicit file is
// an error, missing others are skipped.
func Load(paths []string, explicit string) (File, []string, error) {
	var merged File
	var used []string
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) && p != explicit {
			continue
		}
		if err != nil {
			return merged, used, fmt.Errorf("read config %s: %w", p, err)
		}
		f, err := Parse(data)
		if err != nil {
			return merged, used, fmt.Errorf("config %s: %w", p, err)
		}
		merged = merge(merged, f)
		used = append(used, p)
	}
	return merged, used, nil
}

func merge(a, b File) File {
	if b.Model != "" {
		a.Model = b.Model
	}
	if b.SmallModel != "" {
		a.SmallModel = b.SmallModel
	}
	if len(b.Provider) > 0 && a.Provider == nil {
		a.Provider = map[string]Provider{}
	}
	for k, v := range b.Provider {
		a.Provider[k] = v
	}
	if len(b.Permission) > 0 {
		a.Permission = b.Permission
	}
	if b.Agentd.MaxSteps != 0 {
		a.Agentd.MaxSteps = b.Agentd.MaxSteps
	}
	if b.Agentd.Resume != nil {
		a.Agentd.Resume = b.Agentd.Resume
	}
	if b.Agentd.Retry != nil {
		a.Agentd.Retry = b.Agentd.Retry
	}
	return a
}

// ParseModel splits "provider/model" (the model id may contain slashes).
func ParseModel(s string) (core.ModelRef, error) {
	p, m, ok := strings.Cut(s, "/")
	if !ok || p == "" || m == "" {
		return core.ModelRef{}, fmt.Errorf("model %q: want provider/model", s)
	}
	return core.ModelRef{ProviderID: p, ModelID: m}, nil
}

// Providers returns the configured providers plus the stock ones that an
// API key in the environment enables (marked FromEnv).
func (f File) Providers() map[string]Provider {
	providers := map[string]Provider{}
	for k, v := range f.Provider {
		providers[k] = v
	}
	if _, ok := providers["openai"]; !ok && os.Getenv("OPENAI_API_KEY") != "" {
		providers["openai"] = Provider{NPM: "@ai-sdk/openai", Name: "OpenAI", FromEnv: "OPENAI_API_KEY"}
	}
	if _, ok := providers["anthropic"]; !ok && os.Getenv("ANTHROPIC_API_KEY") != "" {
		providers["anthropic"] = Provider{NPM: "@ai-sdk/anthropic", Name: "Anthropic", FromEnv: "ANTHROPIC_API_KEY"}
	}
	return providers
}

// Build turns the configuration into a model registry and the default
// model. With no provider configured the default is agentd/scripted.
func (f File) Build() (*llm.Registry, core.ModelRef, error) {
	reg := llm.NewRegistry()
	reg.Add(scripted.ProviderID, &scripted.Model{}, nil)
	for id, p := range f.Providers() {
		prov, err := p.provider(id)
		if err != nil {
			return nil, core.ModelRef{}, err
		}
		var models map[string]string
		if len(p.Models) > 0 {
			models = map[string]string{}
			for mid, m := range p.Models {
				name := mid
				if m.ID != "" {
					name = m.ID
				}
				models[mid] = name
			}
		}
		reg.Add(id, prov, models)
	}
	def := core.ModelRef{ProviderID: scripted.ProviderID, ModelID: scripted.ModelID}
	if f.Model != "" {
		ref, err := ParseModel(f.Model)
		if err != nil {
			return nil, def, err
		}
		if _, _, err := reg.Resolve(ref); err != nil {
			return nil, def, fmt.Errorf("model %q: %w", f.Model, err)
		}
		def = ref
	}
	return reg, def, nil
}

func (p Provider) provider(id string) (llm.Provider, error) {
	timeout := time.Duration(0)
	if len(p.Options.Timeout) > 0 && string(p.Options.Timeout) != "false" {
		var ms float64
		if err := json.Unmarshal(p.Options.Timeout, &ms); err != nil {
			return nil, fmt.Errorf("provider %s: options.timeout: want milliseconds or false", id)
		}
		timeout = time.Duration(ms * float64(time.Millisecond))
	}
	kind := p.NPM
	if kind == "" {
		switch id {
		case "anthropic":
			kind = "@ai-sdk/anthropic"
		default:
			kind = "@ai-sdk/openai-compatible"
		}
	}
	switch kind {
	case "@ai-sdk/anthropic":
		key := p.Options.APIKey
		if key == "" {
			key = os.Getenv("ANTHROPIC_API_KEY")
		}
		return anthropic.New(anthropic.Options{BaseURL: p.Options.BaseURL, APIKey: key, Headers: p.Options.Headers, Timeout: timeout}), nil
	case "@ai-sdk/openai-compatible", "@ai-sdk/openai":
		key := p.Options.APIKey
		if key == "" && id == "openai" {
			key = os.Getenv("OPENAI_API_KEY")
		}
		return openai.New(openai.Options{BaseURL: p.Options.BaseURL, APIKey: key, Headers: p.Options.Headers, Timeout: timeout}), nil
	default:
		return nil, fmt.Errorf("provider %s: npm package %q is not supported (use @ai-sdk/openai-compatible, @ai-sdk/openai or @ai-sdk/anthropic)", id, p.NPM)
	}
}
