package config

import (
	"strings"
	"testing"
)

// TestMissingKeysNameTheFix: a model of a stock provider with no key says
// which variable to set; a configured provider that needs a key and has
// none is listed by KeyProblems with where the key goes; a local server
// (its own baseURL) and a provider with a key are not.
func TestMissingKeysNameTheFix(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "")
	t.Setenv("OPENAI_API_KEY", "")
	f, err := Parse([]byte(`{"model": "anthropic/claude-sonnet-4-5"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.Build(); err == nil || !strings.Contains(err.Error(), `provider "anthropic" is not configured: set ANTHROPIC_API_KEY`) {
		t.Errorf("a stock provider's model without its key: %v", err)
	}
	f, err = Parse([]byte(`{"provider": {
		"anthropic": {},
		"openai": {"options": {"apiKey": "sk"}},
		"local": {"options": {"baseURL": "http://127.0.0.1:11434/v1"}},
		"claude": {"npm": "@ai-sdk/anthropic", "options": {"headers": {"X-Api-Key": "k"}}},
		"corp": {"npm": "@ai-sdk/anthropic"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	got := f.KeyProblems()
	if len(got) != 2 || !strings.HasPrefix(got[0], "provider anthropic has no API key: set ANTHROPIC_API_KEY, or provider.anthropic.options.apiKey") ||
		!strings.HasPrefix(got[1], "provider corp has no API key: set provider.corp.options.apiKey") {
		t.Errorf("KeyProblems = %q", got)
	}
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant")
	if got := f.KeyProblems(); len(got) != 1 {
		t.Errorf("with ANTHROPIC_API_KEY set: %q", got)
	}
}
