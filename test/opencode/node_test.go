package opencode_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/agent"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/engine"
	"github.com/agentd/agentd/internal/fakellm"
	"github.com/agentd/agentd/internal/llm/scripted"
	"github.com/agentd/agentd/internal/permission"
)

// node is an agentd for one test: its workspace, its address and the
// recorder in front of it.
type node struct {
	app *app.App
	dir string
	rec *recorder
}

// startNode starts agentd with the offline scripted model as default and a
// fakellm-backed provider "fake" (model fake-model), in a fresh workspace.
// extra is merged into the configuration (e.g. a permission block); opts
// change the node's configuration last.
func startNode(t *testing.T, extra string, opts ...func(*app.Config)) *node {
	t.Helper()
	fake := httptest.NewServer(fakellm.New(fakellm.Options{Second: 50 * time.Millisecond}).Handler())
	t.Cleanup(fake.Close)
	conf := fmt.Sprintf(`{
		"provider": {"fake": {"npm": "@ai-sdk/openai-compatible", "name": "Fake",
			"options": {"baseURL": %q, "apiKey": "k"},
			"models": {"fake-model": {"name": "Fake Model", "limit": {"context": 100000, "output": 8000}}}}}%s}`,
		fake.URL+"/v1", extra)
	f, err := config.Parse([]byte(conf))
	if err != nil {
		t.Fatal(err)
	}
	models, def, err := f.Build()
	if err != nil {
		t.Fatal(err)
	}
	models.Add(scripted.ProviderID, &scripted.Model{Second: 100 * time.Millisecond}, nil)
	rules, err := permission.ParseConfig(f.Permission)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hello from the workspace\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := app.Config{
		DBPath: filepath.Join(t.TempDir(), "agentd.db"), Host: "127.0.0.1", Version: "test",
		Directory: dir, Models: models, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Heartbeat: 200 * time.Millisecond, WorktreeDir: t.TempDir(), SkillDirs: []string{},
	}
	cfg.Security.LoopbackOnly = true
	cfg.Engine.Resume = true
	cfg.Engine.DefaultModel = def
	cfg.Engine.Permission = rules
	cfg.Engine.Retry = engine.RetryPolicy{MaxAttempts: 3, MaxElapsed: time.Minute, Base: 10 * time.Millisecond, Cap: 50 * time.Millisecond}
	catalog := app.Catalog(f, def, rules, agent.Builtins())
	cfg.Catalog = &catalog
	if cfg.Commands, err = app.Commands(f); err != nil {
		t.Fatal(err)
	}
	cfg.MCP = f.MCP
	if f.Agentd.MCP != nil {
		cfg.MCPAdd = f.Agentd.MCP.Add
	}
	cfg.Engine.Questions = f.Agentd.Questions
	cfg.Terminals.Enabled = f.Agentd.Terminal != nil && f.Agentd.Terminal.Enabled
	for _, o := range opts {
		o(&cfg)
	}
	a, err := app.Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Stop(context.Background()) })
	return &node{app: a, dir: dir, rec: newRecorder(t, a.URL())}
}

// call makes a request through the recorder and decodes a JSON answer
// into out (when not nil).
func (n *node) call(t *testing.T, method, path string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = strings.NewReader(string(b))
	}
	req, err := http.NewRequestWithContext(t.Context(), method, n.rec.URL()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, b, err)
		}
	}
	return resp.StatusCode
}

// follow reads an SSE route through the recorder until the test ends, so
// that the recorder sees every event agentd sends there.
func (n *node) follow(t *testing.T, path string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	req, _ := http.NewRequestWithContext(ctx, "GET", n.rec.URL()+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(done)
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
	}()
}

// waitUntil polls cond (a cheap HTTP read) until it holds or the test
// times out; the condition is a state only the server can reach.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
