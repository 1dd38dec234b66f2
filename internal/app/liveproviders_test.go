package app_test

import (
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/fakellm"
)

// providerList is GET /provider's answer, or /config/providers' (the
// same providers under another name), by provider id with its model ids.
func providerList(t *testing.T, n *node, path string) (models map[string][]string, connected []string, source map[string]string) {
	t.Helper()
	var out struct {
		All       []map[string]any `json:"all"`
		Providers []map[string]any `json:"providers"`
		Connected []string         `json:"connected"`
	}
	if code := n.call("GET", path, nil, &out); code != 200 {
		t.Fatalf("GET %s: %d", path, code)
	}
	models, source = map[string][]string{}, map[string]string{}
	for _, p := range append(out.All, out.Providers...) {
		id, _ := p["id"].(string)
		source[id], _ = p["source"].(string)
		ms, _ := p["models"].(map[string]any)
		models[id] = []string{}
		for mid := range ms {
			models[id] = append(models[id], mid)
		}
	}
	return models, out.Connected, source
}

// TestLoginListedAtOnce: opencode's TUI /connect with a login plugin
// (opencode-anthropic-auth's case: nothing configures anthropic and no
// key is set). Before the login GET /provider does not list anthropic;
// once the callback has stored the login, GET /provider and
// /config/providers list it with the provider hook's model (the hook
// called again with the login), and a prompt to that model works, without
// a restart; DELETE /auth/anthropic takes it out of the list again and a
// prompt to it is refused.
func TestLoginListedAtOnce(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "")
	dir, specs := pluginFolder(t, "oauthlogin.js")
	fake := fakellm.New(fakellm.Options{Second: 20 * time.Millisecond})
	hs := httptest.NewServer(fake.Handler())
	t.Cleanup(hs.Close)
	logPath := t.TempDir() + "/plugin.log"
	specs[0].Options = map[string]any{"target": hs.URL, "provider": "anthropic", "log": logPath}
	f, err := config.Parse([]byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	models, def, err := f.Build()
	if err != nil {
		t.Fatal(err)
	}
	n := startNode(t, func(c *app.Config) {
		c.Models, c.Engine.DefaultModel = models, def
		c.Plugins.Specs, c.Plugins.Dir = specs, dir
	})
	for _, path := range []string{"/provider", "/config/providers"} {
		if ms, connected, _ := providerList(t, n, path); ms["anthropic"] != nil || strings.Contains(strings.Join(connected, ","), "anthropic") {
			t.Fatalf("GET %s lists anthropic before any login: %v %v", path, ms, connected)
		}
	}
	var a map[string]string
	if code := n.call("POST", "/provider/anthropic/oauth/authorize", map[string]any{"method": 0, "inputs": map[string]string{"team": "red"}}, &a); code != 200 {
		t.Fatalf("authorize: %d %v", code, a)
	}
	var ok bool
	if code := n.call("POST", "/provider/anthropic/oauth/callback", map[string]any{"method": 0, "code": "good-code"}, &ok); code != 200 || !ok {
		t.Fatalf("callback: %d %v", code, ok)
	}
	// What the TUI does next: dispose the instance, then read the lists again.
	if code := n.call("POST", "/instance/dispose", nil, nil); code != 200 {
		t.Fatalf("POST /instance/dispose: %d", code)
	}
	for _, path := range []string{"/provider", "/config/providers"} {
		ms, connected, source := providerList(t, n, path)
		if !strings.Contains(strings.Join(ms["anthropic"], ","), "plugin-model") || source["anthropic"] != "custom" {
			t.Errorf("GET %s after the login: anthropic %v (source %q)", path, ms["anthropic"], source["anthropic"])
		}
		if path == "/provider" && !strings.Contains(strings.Join(connected, ","), "anthropic") {
			t.Errorf("GET /provider after the login: connected %v", connected)
		}
	}
	if b, _ := os.ReadFile(logPath); !strings.Contains(string(b), `"auth":"oauth"`) {
		t.Errorf("the provider hook was not called again with the login:\n%s", b)
	}
	sid := n.session()
	m, err := n.c.Send(t.Context(), sid, client.Prompt{Text: "reply:logged in", Model: &client.ModelRef{ProviderID: "anthropic", ModelID: "plugin-model"}})
	if err != nil || textOf(m) != "logged in" {
		t.Fatalf("a prompt to the login's provider: %v %q %+v", err, textOf(m), m.Info.Error)
	}

	if code := n.call("DELETE", "/auth/anthropic", nil, &ok); code != 200 || !ok {
		t.Fatalf("DELETE /auth/anthropic: %d", code)
	}
	for _, path := range []string{"/provider", "/config/providers"} {
		if ms, connected, _ := providerList(t, n, path); ms["anthropic"] != nil || strings.Contains(strings.Join(connected, ","), "anthropic") {
			t.Errorf("GET %s lists anthropic after DELETE /auth/anthropic: %v %v", path, ms, connected)
		}
	}
	m, err = n.c.Send(t.Context(), sid, client.Prompt{Text: "reply:no more", Model: &client.ModelRef{ProviderID: "anthropic", ModelID: "plugin-model"}})
	if err == nil && (m.Info.Error == nil || textOf(m) == "no more") {
		t.Errorf("a prompt to anthropic after the login was removed: %q %+v", textOf(m), m.Info.Error)
	}
}

// TestStoredKeyEnablesStockProvider: a plain key (no plugin) stored with
// PUT /auth/openai, where nothing configures openai and OPENAI_API_KEY is
// unset, enables the stock provider at once: GET /provider lists it
// (source "api", as opencode says of a stored key) and a model naming it
// resolves to a client that sends the stored key; DELETE /auth/openai
// takes it out of the list and a model naming it is refused again with
// how to enable it. opencode 2's GET /api/provider says the same. A restarted node lists it from the stored key alone.
func TestStoredKeyEnablesStockProvider(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	f, err := config.Parse([]byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	build := func(c *app.Config) {
		if err := c.Apply(f, t.TempDir()); err != nil {
			t.Fatal(err)
		}
	}
	n := startNode(t, build)
	ref := core.ModelRef{ProviderID: "openai", ModelID: "gpt-5"}
	listed := func(n *node) (bool, string) {
		t.Helper()
		_, connected, source := providerList(t, n, "/provider")
		ms, _, _ := providerList(t, n, "/config/providers")
		on := strings.Contains(","+strings.Join(connected, ",")+",", ",openai,")
		if _, inConfig := ms["openai"]; inConfig != on {
			t.Errorf("GET /provider (connected %v) and /config/providers (%v) disagree", connected, ms)
		}
		if _, b := n.raw("GET", "/api/provider", ""); strings.Contains(string(b), `"id":"openai"`) != on {
			t.Errorf("opencode 2's GET /api/provider disagrees (openai listed: %v): %.300s", on, b)
		}
		return on, source["openai"]
	}
	if on, _ := listed(n); on {
		t.Fatal("openai listed before any key")
	}
	if _, _, err := n.cfg.Models.Resolve(ref); err == nil || !strings.Contains(err.Error(), "PUT /auth/openai") {
		t.Errorf("a model of openai without a key: %v", err)
	}
	var ok bool
	if code := n.call("PUT", "/auth/openai", map[string]string{"type": "api", "key": "sk-plain"}, &ok); code != 200 || !ok {
		t.Fatalf("PUT /auth/openai: %d", code)
	}
	if on, source := listed(n); !on || source != "api" {
		t.Errorf("after PUT /auth/openai: listed %v, source %q", on, source)
	}
	if p, _, err := n.cfg.Models.Resolve(ref); err != nil || p == nil {
		t.Errorf("a model of openai with a stored key: %v", err)
	}
	n = n.restart(build)
	if on, _ := listed(n); !on {
		t.Error("a restarted node does not list openai from its stored key")
	}
	if code := n.call("DELETE", "/auth/openai", nil, &ok); code != 200 || !ok {
		t.Fatalf("DELETE /auth/openai: %d", code)
	}
	if on, _ := listed(n); on {
		t.Error("openai listed after DELETE /auth/openai")
	}
	if _, _, err := n.cfg.Models.Resolve(ref); err == nil || !strings.Contains(err.Error(), "is not configured") {
		t.Errorf("a model of openai after DELETE: %v", err)
	}
}
