package app_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/credential"
	"github.com/agentd/agentd/internal/fakellm"
)

// BenchmarkPluginFetch is a model call whose answer streams in 200 deltas
// (the fake model over HTTP, one turn through the HTTP API), made directly
// and through a plugin's auth fetch (internal/plugin/testdata's
// oauthlogin.js, with a stored login): the CPU a turn costs (the server's,
// the fake model's included, and the host's) and its p50.
func BenchmarkPluginFetch(b *testing.B) {
	words := make([]string, 200)
	for i := range words {
		words[i] = "word"
	}
	prompt := client.Prompt{Text: "reply:" + strings.Join(words, " ")}
	for _, mode := range []string{"direct", "plugin-fetch"} {
		b.Run(mode, func(b *testing.B) {
			fake := httptest.NewServer(fakellm.New(fakellm.Options{}).Handler())
			defer fake.Close()
			base, key := fake.URL+"/v1", `"apiKey": "k"`
			cfg := app.Config{DBPath: filepath.Join(b.TempDir(), "a.db"), Host: "127.0.0.1", Version: "bench",
				Directory: b.TempDir(), Logger: quietLogger(), Heartbeat: time.Hour, Tools: testTools(nil)}
			if mode != "direct" {
				dir, specs := pluginFolder(b, "oauthlogin.js")
				specs[0].Options = map[string]any{"target": fake.URL}
				cfg.Plugins.Specs, cfg.Plugins.Dir = specs, dir
				base, key = "http://127.0.0.1:1/v1", `"headers": {}`
				creds, err := credential.Open(app.CredentialsFile(cfg.DBPath))
				if err != nil {
					b.Fatal(err)
				}
				if err := creds.Put("fake", credential.Entry{Type: "oauth", Access: "a", Refresh: "r", Expires: time.Now().Add(time.Hour).UnixMilli()}); err != nil {
					b.Fatal(err)
				}
				cfg.Credentials = creds
			}
			f, err := config.Parse([]byte(`{"model": "fake/fake-model", "provider": {"fake": {"npm": "@ai-sdk/openai-compatible",
			  "options": {"baseURL": "` + base + `", ` + key + `}, "models": {"fake-model": {}}}}}`))
			if err != nil {
				b.Fatal(err)
			}
			if cfg.Models, cfg.Engine.DefaultModel, err = f.Build(); err != nil {
				b.Fatal(err)
			}
			a, err := app.Start(context.Background(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer a.Stop(context.Background())
			c := client.New(a.URL())
			s, _ := c.CreateSession(context.Background(), "", "")
			if m, err := c.Send(context.Background(), s.ID, prompt); err != nil || !strings.HasPrefix(textOf(m), "word word") { // warm
				b.Fatalf("warm-up: %v %q", err, textOf(m))
			}
			measureTurns(b, a, c, s.ID, prompt)
		})
	}
}
