package app_test

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/credential"
	"github.com/agentd/agentd/internal/fakellm"
	"github.com/agentd/agentd/internal/store/postgres/pgtest"
)

// TestClusterSharesCredentials: two nodes on one PostgreSQL database. A
// key stored through node a's PUT /auth/{id} (the TUI's /connect) is what
// node b sends to a provider configured without one, and a stock provider
// nothing configures (openai) is listed by b's GET /provider once a key
// for it is stored through a; DELETE /auth/{id} through a takes both away
// on b (the provider configured without a key then sends none, as it did
// before). A key in a's credential file from before (one file per node)
// is imported at a's start: b lists its provider too.
func TestClusterSharesCredentials(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("ANTHROPIC_API_KEY", "")
	db := pgtest.Schema(t)
	f, auths := keylessProvider(t)
	// Each node its own credential file, as on separate machines; a's
	// holds a key from before the cluster shared them.
	files := map[string]string{"a": filepath.Join(t.TempDir(), "credentials.json"), "b": filepath.Join(t.TempDir(), "credentials.json")}
	if err := os.WriteFile(files["a"], []byte(`{"anthropic":{"type":"api","key":"sk-ant-old","time":1}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	on := func(name string) option {
		return func(c *app.Config) {
			c.DBPath, c.Node, c.CredentialsFile = db, name, files[name]
			if err := c.Apply(f, t.TempDir()); err != nil {
				t.Fatal(err)
			}
		}
	}
	a, b := startNode(t, on("a")), startNode(t, on("b"))
	listed := func(n *node, id string) bool {
		_, connected, _ := providerList(t, n, "/provider")
		return strings.Contains(","+strings.Join(connected, ",")+",", ","+id+",")
	}
	openaiListed := func(n *node) bool { return listed(n, "openai") }
	if openaiListed(b) {
		t.Fatal("b lists openai before any key")
	}
	// a imported its file at start and set it aside; b lists what it held.
	if !listed(b, "anthropic") {
		t.Error("b does not list anthropic, whose key was in a's credential file")
	}
	if _, err := os.Stat(files["a"] + credential.ImportedSuffix); err != nil {
		t.Errorf("a's imported file was not set aside: %v", err)
	}
	var ok bool
	for _, put := range []string{"/auth/keyless", "/auth/openai"} {
		if code := a.call("PUT", put, map[string]string{"type": "api", "key": "sk-cluster-secret"}, &ok); code != 200 || !ok {
			t.Fatalf("PUT %s on a: %d", put, code)
		}
	}
	waitUntil(t, "b lists openai after PUT /auth/openai on a", func() bool { return openaiListed(b) })
	sid := b.session()
	m, err := b.c.Send(t.Context(), sid, client.Prompt{Text: "reply:hi", Model: &client.ModelRef{ProviderID: "keyless", ModelID: "m"}})
	if err != nil || m.Info.Error != nil || textOf(m) != "hi" {
		t.Fatalf("a prompt on b with the key stored through a: %v %q %+v", err, textOf(m), m.Info.Error)
	}
	auth := auths()
	if got := auth[len(auth)-1]; got != "Bearer sk-cluster-secret" {
		t.Errorf("b sent %q to the provider", got)
	}

	for _, del := range []string{"/auth/keyless", "/auth/openai"} {
		if code := a.call("DELETE", del, nil, &ok); code != 200 || !ok {
			t.Fatalf("DELETE %s on a: %d", del, code)
		}
	}
	waitUntil(t, "b takes openai out after DELETE /auth/openai on a", func() bool { return !openaiListed(b) })
	before := len(auths())
	m, err = b.c.Send(t.Context(), sid, client.Prompt{Text: "reply:no more", Model: &client.ModelRef{ProviderID: "keyless", ModelID: "m"}})
	if err != nil || textOf(m) != "no more" {
		t.Fatalf("a prompt on b after the key was removed: %v %q %+v", err, textOf(m), m.Info.Error)
	}
	if after := auths()[before:]; len(after) == 0 || strings.Contains(strings.Join(after, " "), "sk-cluster-secret") {
		t.Errorf("after DELETE on a, b sent %q", after)
	}
}

// waitUntil returns once cond holds, checking it every 20 ms; it fails
// the test after 30 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

// TestClusterSharesLogin: a plugin's OAuth login made through node a (the
// TUI's /connect: authorize, then the callback that stores it) enables its
// provider on node b too: b lists it with the provider hook's model and a
// prompt to that model on b works; DELETE /auth/{id} on a takes it out of
// b's list.
func TestClusterSharesLogin(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "")
	db := pgtest.Schema(t)
	dir, specs := pluginFolder(t, "oauthlogin.js")
	fake := fakellm.New(fakellm.Options{Second: 20 * time.Millisecond})
	hs := httptest.NewServer(fake.Handler())
	t.Cleanup(hs.Close)
	specs[0].Options = map[string]any{"target": hs.URL, "provider": "anthropic", "log": filepath.Join(t.TempDir(), "plugin.log")}
	f, err := config.Parse([]byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	on := func(name string) option {
		return func(c *app.Config) {
			models, def, err := f.Build()
			if err != nil {
				t.Fatal(err)
			}
			c.DBPath, c.Node, c.Models, c.Engine.DefaultModel = db, name, models, def
			c.Plugins.Specs, c.Plugins.Dir = specs, dir
		}
	}
	a, b := startNode(t, on("a")), startNode(t, on("b"))
	anthropic := func(n *node) []string {
		ms, _, _ := providerList(t, n, "/provider")
		return ms["anthropic"]
	}
	if anthropic(b) != nil {
		t.Fatal("b lists anthropic before any login")
	}
	var auth map[string]string
	if code := a.call("POST", "/provider/anthropic/oauth/authorize", map[string]any{"method": 0, "inputs": map[string]string{"team": "red"}}, &auth); code != 200 {
		t.Fatalf("authorize on a: %d %v", code, auth)
	}
	var ok bool
	if code := a.call("POST", "/provider/anthropic/oauth/callback", map[string]any{"method": 0, "code": "good-code"}, &ok); code != 200 || !ok {
		t.Fatalf("callback on a: %d %v", code, ok)
	}
	waitUntil(t, "b lists anthropic with the hook's model after the login on a", func() bool {
		return strings.Contains(strings.Join(anthropic(b), ","), "plugin-model")
	})
	sid := b.session()
	m, err := b.c.Send(t.Context(), sid, client.Prompt{Text: "reply:logged in", Model: &client.ModelRef{ProviderID: "anthropic", ModelID: "plugin-model"}})
	if err != nil || textOf(m) != "logged in" {
		t.Fatalf("a prompt on b to the login's provider: %v %q %+v", err, textOf(m), m.Info.Error)
	}
	if code := a.call("DELETE", "/auth/anthropic", nil, &ok); code != 200 || !ok {
		t.Fatalf("DELETE /auth/anthropic on a: %d", code)
	}
	waitUntil(t, "b takes anthropic out after DELETE on a", func() bool { return anthropic(b) == nil })
}
