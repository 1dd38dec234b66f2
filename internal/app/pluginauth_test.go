package app_test

import (
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/credential"
	"github.com/agentd/agentd/internal/fakellm"
)

// authNode starts a node whose default provider "fake" points at an
// address where nothing listens, with the oauthlogin test plugin, whose
// fetch sends the calls to the fake model instead (opencode-anthropic-auth
// does the same to Anthropic's address).
func authNode(t *testing.T, timeout time.Duration) (*node, *fakellm.Server, *headerLog, string) {
	t.Helper()
	dir, specs := pluginFolder(t, "oauthlogin.js")
	fake := fakellm.New(fakellm.Options{Second: 20 * time.Millisecond, Record: true})
	headers := &headerLog{}
	hs := httptest.NewServer(headers.wrap(fake.Handler()))
	t.Cleanup(hs.Close)
	logPath := filepath.Join(t.TempDir(), "plugin.log")
	specs[0].Options = map[string]any{"log": logPath, "target": hs.URL}
	f, err := config.Parse([]byte(`{"model": "fake/fake-model", "provider": {"fake": {"npm": "@ai-sdk/openai-compatible",
	  "options": {"baseURL": "http://127.0.0.1:1/v1"}, "models": {"fake-model": {"limit": {"context": 100000, "output": 4096}}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	models, def, err := f.Build()
	if err != nil {
		t.Fatal(err)
	}
	n := startNode(t, func(c *app.Config) {
		c.Models, c.Engine.DefaultModel = models, def
		c.Plugins.Specs, c.Plugins.Dir, c.Plugins.Timeout = specs, dir, timeout
		if os.Getenv("AUTHDBG") != "" {
			c.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
		}
	})
	return n, fake, headers, logPath
}

// TestPluginAuthTitleInSessionDirectory: a session's title, asked of a
// provider a login plugin serves, goes through the loader (and so the
// fetch) of the plugin instance of the session's directory, as its run's
// calls do, not the server directory's.
func TestPluginAuthTitleInSessionDirectory(t *testing.T) {
	t.Parallel()
	n, fake, _, logPath := authNode(t, 5*time.Second)
	if code := n.call("PUT", "/auth/fake", map[string]any{"type": "oauth", "refresh": "r", "access": "a", "expires": 4102444800000}, nil); code != 200 {
		t.Fatalf("PUT /auth/fake: %d", code)
	}
	sess, err := n.c.CreateSession(t.Context(), "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if m := n.send(sess.ID, "reply:hello"); textOf(m) != "hello" {
		t.Fatalf("answer = %q (%+v)", textOf(m), m.Info.Error)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !slices.ContainsFunc(fake.Recorded(), func(r fakellm.Recorded) bool { return r.Request.Purpose == "title" }) {
		if time.Now().After(deadline) {
			t.Fatal("no title was asked")
		}
		time.Sleep(10 * time.Millisecond)
	}
	loaders := 0
	for _, l := range readLog(t, logPath) {
		if l["loader"] != nil {
			loaders++
			if l["dir"] != sess.Directory {
				t.Errorf("a loader ran in the instance of %v, not of the session's directory %s", l["dir"], sess.Directory)
			}
		}
	}
	if loaders == 0 {
		t.Error("no loader ran")
	}
}

// storedCredential reads the node's credential file.
func storedCredential(t *testing.T, n *node, id string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(app.CredentialsFile(n.cfg.DBPath))
	if err != nil {
		t.Fatal(err)
	}
	var all map[string]map[string]any
	if err := json.Unmarshal(b, &all); err != nil {
		t.Fatal(err)
	}
	return all[id]
}

func (h *headerLog) values(name string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, g := range h.got {
		out = append(out, g.Get(name))
	}
	return out
}

// TestPluginAuthFetch: with an OAuth login stored, the plugin's auth
// loader is called and its fetch carries the provider's calls: the fake
// model sees the plugin's bearer, its header and the loader's header at
// the address the fetch chose; an expired token is refreshed by the plugin
// through its client (PUT /auth/fake) and the next call uses the stored
// one without refreshing again; an answer streams through the fetch (its
// first words are stored while the fake model is still answering), and an
// abort reaches the fake model through it; a host killed while an answer
// streams fails that call (kept, marked retried); a fetch that never answers
// fails the call after the hook timeout with the reason, and the run
// ends; so does a loader that never answers.
func TestPluginAuthFetch(t *testing.T) {
	t.Parallel()
	n, fake, headers, logPath := authNode(t, 2*time.Second)
	ctx := t.Context()
	if code := n.call("PUT", "/auth/fake", map[string]any{"type": "oauth", "refresh": "refresh-0", "access": "access-old", "expires": 1}, nil); code != 200 {
		t.Fatalf("PUT /auth/fake: %d", code)
	}
	sid := n.session()
	if m := n.send(sid, "reply:through the plugin"); textOf(m) != "through the plugin" {
		t.Fatalf("answer = %q (%+v)", textOf(m), m.Info.Error)
	}
	auths := headers.values("Authorization")
	if len(auths) == 0 || auths[len(auths)-1] != "Bearer access-refreshed-1" {
		t.Errorf("the fake model saw Authorization %q, want the refreshed token", auths)
	}
	if got := headers.values("X-Plugin-Auth"); len(got) == 0 || got[len(got)-1] != "oauth-login" {
		t.Errorf("x-plugin-auth = %q", got)
	}
	if got := headers.values("X-Loader-Option"); len(got) == 0 || got[len(got)-1] != "from-loader" {
		t.Errorf("the loader's headers option: x-loader-option = %q", got)
	}
	if c := storedCredential(t, n, "fake"); c["access"] != "access-refreshed-1" || c["type"] != "oauth" {
		t.Errorf("the plugin's refresh was not stored: %v", c)
	}
	before := len(headers.values("Authorization"))
	n.send(sid, "reply:again")
	auths = headers.values("Authorization")
	if len(auths) <= before || auths[len(auths)-1] != "Bearer access-refreshed-1" {
		t.Errorf("the next call's Authorization = %q, want the stored refreshed token", auths[before:])
	}
	refreshed, loaders := 0, 0
	for _, l := range readLog(t, logPath) {
		if l["refreshed"] != nil {
			refreshed++
		}
		if l["loader"] == "oauth" {
			loaders++
		}
	}
	if refreshed != 1 || loaders != 1 {
		t.Errorf("refreshed %d times, loader called %d times; want 1 and 1", refreshed, loaders)
	}

	// A streamed answer arrives as it is written.
	sid2 := n.session()
	if err := n.c.SendAsync(ctx, sid2, client.Prompt{Text: "sleep:500\nreply:never"}); err != nil {
		t.Fatal(err)
	}
	n.streamingStarted(sid2, "")
	if fake.Inflight() == 0 {
		t.Error("the first words were stored only after the fake model finished: the fetch's body was not streamed")
	}
	if _, err := n.c.Abort(ctx, sid2); err != nil {
		t.Fatal(err)
	}
	select {
	case <-fake.ClientGone():
	case <-time.After(10 * time.Second):
		t.Error("the abort did not reach the fake model through the plugin's fetch")
	}
	n.waitIdle(sid2)

	// A host that dies mid-stream fails that call (kept, marked as
	// retried), and the run goes on with a restarted host.
	sid3 := n.session()
	if err := n.c.SendAsync(ctx, sid3, client.Prompt{Text: "sleep:500\nreply:never"}); err != nil {
		t.Fatal(err)
	}
	n.streamingStarted(sid3, "")
	if err := syscall.Kill(-n.app.PluginHost().Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	n.waitTranscript(sid3, func(msgs []core.MessageWithParts) bool {
		for _, m := range msgs {
			if e := m.Info.Error; e.Ref() == core.RefStreamRetried && strings.Contains(e.Data.Message, "plugin host exited") {
				return true
			}
		}
		return false
	})
	if _, err := n.c.Abort(ctx, sid3); err != nil {
		t.Fatal(err)
	}
	n.waitIdle(sid3)

	// A fetch that never answers.
	start := time.Now()
	m := n.send(n.session(), "[stall]\nreply:x")
	if m.Info.Error == nil || !strings.Contains(m.Info.Error.Data.Message, "no answer within 2s") ||
		!strings.Contains(m.Info.Error.Data.Message, "fake") {
		t.Errorf("a stuck fetch: the message's error is %+v", m.Info.Error)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("a stuck fetch held the run %s", d)
	}

	// A loader that never answers (a key replaces the login: the loader
	// runs again).
	if code := n.call("PUT", "/auth/fake", map[string]any{"type": "api", "key": "stall-loader"}, nil); code != 200 {
		t.Fatalf("PUT /auth/fake: %d", code)
	}
	m = n.send(n.session(), "reply:x")
	if m.Info.Error == nil || !strings.Contains(m.Info.Error.Data.Message, "auth loader of provider fake") ||
		!strings.Contains(m.Info.Error.Data.Message, "no answer within 2s") {
		t.Errorf("a stuck loader: the message's error is %+v", m.Info.Error)
	}
}

// TestPluginAuthRoutes: GET /provider/auth lists the plugin's login
// methods in opencode's shape; POST /provider/fake/oauth/authorize calls
// the method's authorize (its prompts validated first) and callback its
// callback with the code, storing the login as opencode does, which the
// next model call uses through the loader; the plugin's provider hook adds
// a model that GET /provider and /config/providers list and a prompt can
// name.
func TestPluginAuthRoutes(t *testing.T) {
	t.Parallel()
	n, fake, headers, _ := authNode(t, 5*time.Second)
	var methods map[string][]map[string]any
	if code := n.call("GET", "/provider/auth", nil, &methods); code != 200 || len(methods["fake"]) != 2 ||
		methods["fake"][0]["type"] != "oauth" || methods["fake"][1]["label"] != "Paste an API key" {
		t.Fatalf("GET /provider/auth: %d %v", code, methods)
	}
	if p, _ := methods["fake"][0]["prompts"].([]any); len(p) != 1 || p[0].(map[string]any)["placeholder"] != "e.g. red" {
		t.Errorf("the method's prompts: %v", methods["fake"][0]["prompts"])
	}
	code, b := n.raw("POST", "/provider/fake/oauth/authorize", `{"method":0,"inputs":{"team":"bad"}}`)
	if code != 400 || !strings.Contains(string(b), "ProviderAuthValidationFailed") || !strings.Contains(string(b), "no such team") {
		t.Errorf("an invalid input: %d %s", code, b)
	}
	code, b = n.raw("POST", "/provider/fake/oauth/callback", `{"method":0,"code":"good-code"}`)
	if code != 400 || !strings.Contains(string(b), "ProviderAuthOauthMissing") {
		t.Errorf("a callback before authorize: %d %s", code, b)
	}
	var a map[string]string
	if code := n.call("POST", "/provider/fake/oauth/authorize", map[string]any{"method": 0, "inputs": map[string]string{"team": "red"}}, &a); code != 200 ||
		a["method"] != "code" || !strings.HasSuffix(a["url"], "team=red") || a["instructions"] == "" {
		t.Fatalf("authorize: %d %v", code, a)
	}
	code, b = n.raw("POST", "/provider/fake/oauth/callback", `{"method":0}`)
	if code != 400 || !strings.Contains(string(b), "ProviderAuthOauthCodeMissing") {
		t.Errorf("a callback without its code: %d %s", code, b)
	}
	code, b = n.raw("POST", "/provider/fake/oauth/callback", `{"method":0,"code":"wrong"}`)
	if code != 400 || !strings.Contains(string(b), "ProviderAuthOauthCallbackFailed") {
		t.Errorf("a wrong code: %d %s", code, b)
	}
	var ok bool
	if code := n.call("POST", "/provider/fake/oauth/callback", map[string]any{"method": 0, "code": "good-code"}, &ok); code != 200 || !ok {
		t.Fatalf("callback: %d %v", code, ok)
	}
	if c := storedCredential(t, n, "fake"); c["type"] != "oauth" || c["access"] != "access-1" || c["refresh"] != "refresh-1" || c["accountId"] != "acct-1" {
		t.Errorf("the login stored: %v", c)
	}
	if m := n.send(n.session(), "reply:logged in"); textOf(m) != "logged in" {
		t.Fatalf("a call after the login: %q %+v", textOf(m), m.Info.Error)
	}
	if got := headers.values("Authorization"); len(got) == 0 || got[len(got)-1] != "Bearer access-1" {
		t.Errorf("the login's token did not reach the model: %q", got)
	}

	// The provider hook's model.
	for _, path := range []string{"/provider", "/config/providers"} {
		var out struct {
			All       []map[string]any `json:"all"`
			Providers []map[string]any `json:"providers"`
		}
		if code := n.call("GET", path, nil, &out); code != 200 {
			t.Fatalf("GET %s: %d", path, code)
		}
		found := false
		for _, p := range append(out.All, out.Providers...) {
			if ms, _ := p["models"].(map[string]any); p["id"] == "fake" && ms["plugin-model"] != nil && ms["fake-model"] != nil {
				found = true
			}
		}
		if !found {
			t.Errorf("GET %s does not list the provider hook's model: %+v", path, out)
		}
	}
	sid := n.session()
	m, err := n.c.Send(t.Context(), sid, client.Prompt{Text: "reply:from the plugin's model", Model: &client.ModelRef{ProviderID: "fake", ModelID: "plugin-model"}})
	if err != nil || textOf(m) != "from the plugin's model" {
		t.Fatalf("a prompt to the plugin's model: %v %q", err, textOf(m))
	}
	last := fake.Recorded()[len(fake.Recorded())-1]
	if !strings.Contains(string(last.Body), `"model":"fake-model"`) {
		t.Errorf("the plugin's model is sent as its api id: %s", last.Body)
	}
}

// TestPluginAuthStockProvider: opencode-anthropic-auth's case. Nothing
// configures anthropic and no key is set; a stored login and a plugin
// whose auth names anthropic enable it: GET /provider lists it, a prompt
// to any of its models goes through the Anthropic client and the plugin's
// fetch (the fake model sees the bearer, not an API key), and the provider
// hook's model is added without closing the provider to other model ids.
func TestPluginAuthStockProvider(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "")
	dir, specs := pluginFolder(t, "oauthlogin.js")
	fake := fakellm.New(fakellm.Options{Second: 20 * time.Millisecond, Record: true})
	headers := &headerLog{}
	hs := httptest.NewServer(headers.wrap(fake.Handler()))
	t.Cleanup(hs.Close)
	specs[0].Options = map[string]any{"target": hs.URL, "provider": "anthropic"}
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
		creds, err := credential.Open(app.CredentialsFile(c.DBPath))
		if err != nil {
			t.Fatal(err)
		}
		if err := creds.Put("anthropic", credential.Entry{Type: "oauth", Access: "access-1", Refresh: "r",
			Expires: time.Now().Add(time.Hour).UnixMilli()}); err != nil {
			t.Fatal(err)
		}
		c.Credentials = creds
	})
	var list struct {
		All       []map[string]any `json:"all"`
		Connected []string         `json:"connected"`
	}
	if code := n.call("GET", "/provider", nil, &list); code != 200 || !slices.Contains(list.Connected, "anthropic") {
		t.Errorf("GET /provider: %d, connected %v", code, list.Connected)
	}
	sid := n.session()
	m, err := n.c.Send(t.Context(), sid, client.Prompt{Text: "reply:hello from anthropic",
		Model: &client.ModelRef{ProviderID: "anthropic", ModelID: "claude-sonnet-4-5"}})
	if err != nil || textOf(m) != "hello from anthropic" {
		t.Fatalf("a prompt to anthropic: %v %q %+v", err, textOf(m), m.Info.Error)
	}
	if got := headers.values("Authorization"); len(got) == 0 || got[len(got)-1] != "Bearer access-1" {
		t.Errorf("Authorization = %q", got)
	}
	if got := headers.values("X-Api-Key"); len(got) == 0 || got[len(got)-1] != "" {
		t.Errorf("x-api-key = %q, want none", got)
	}
	rec := fake.Recorded()
	if last := rec[len(rec)-1]; !strings.Contains(string(last.Body), `"model":"claude-sonnet-4-5"`) {
		t.Errorf("the request: %s", last.Body)
	}
	m, err = n.c.Send(t.Context(), sid, client.Prompt{Text: "reply:the plugin's model",
		Model: &client.ModelRef{ProviderID: "anthropic", ModelID: "plugin-model"}})
	if err != nil || textOf(m) != "the plugin's model" {
		t.Fatalf("a prompt to the provider hook's model: %v %q", err, textOf(m))
	}
	rec = fake.Recorded()
	if last := rec[len(rec)-1]; !strings.Contains(string(last.Body), `"model":"fake-model"`) {
		t.Errorf("the provider hook's model is sent as its api id: %s", last.Body)
	}
}
