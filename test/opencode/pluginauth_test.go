package opencode_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/plugin"
	"github.com/agentd/agentd/internal/testenv"
)

// TestSchemaProviderLogin: with a plugin that offers a provider login
// (internal/plugin/testdata/oauthlogin.js), GET /provider/auth, both OAuth
// steps and their refusals answer as opencode's document says.
func TestSchemaProviderLogin(t *testing.T) {
	if !testenv.Plugins.Have() {
		testenv.Skip(t, testenv.Plugins, "plugins need Bun and @opencode-ai/plugin")
	}
	dir := t.TempDir()
	mods, err := filepath.Abs(testenv.PluginModules())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(mods, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "internal", "plugin", "testdata", "oauthlogin.js"))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "oauthlogin.js")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, "", func(c *app.Config) {
		c.Plugins.Specs = []plugin.Spec{{Spec: file, Path: file, Options: map[string]any{"target": "http://127.0.0.1:1"}}}
		c.Plugins.Dir = dir
	})
	var methods map[string][]map[string]any
	if code := n.call(t, "GET", "/provider/auth", nil, &methods); code != 200 || len(methods["fake"]) != 2 {
		t.Fatalf("GET /provider/auth: %d %v", code, methods)
	}
	steps := []struct {
		path string
		body map[string]any
		want int
	}{
		{"/provider/fake/oauth/callback", map[string]any{"method": 0, "code": "good-code"}, 400},
		{"/provider/fake/oauth/authorize", map[string]any{"method": 0, "inputs": map[string]string{"team": "bad"}}, 400},
		{"/provider/fake/oauth/authorize", map[string]any{"method": 0, "inputs": map[string]string{"team": "red"}}, 200},
		{"/provider/fake/oauth/callback", map[string]any{"method": 0}, 400},
		{"/provider/fake/oauth/callback", map[string]any{"method": 0, "code": "wrong"}, 400},
		{"/provider/fake/oauth/callback", map[string]any{"method": 0, "code": "good-code"}, 200},
	}
	for _, s := range steps {
		if code := n.call(t, "POST", s.path, s.body, nil); code != s.want {
			t.Errorf("POST %s %v: %d, want %d", s.path, s.body, code, s.want)
		}
	}
	v := n.rec.check(t)
	for _, op := range []string{"GET /provider/auth", "POST /provider/{providerID}/oauth/authorize", "POST /provider/{providerID}/oauth/callback"} {
		if v.operations[op] == 0 {
			t.Errorf("%s was never judged", op)
		}
	}
}
