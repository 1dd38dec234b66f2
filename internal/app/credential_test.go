package app_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/fakellm"
)

// TestStoredKeyReachesProvider: a key stored with PUT /auth/{id} (the
// TUI's /connect) is what a provider configured without one sends, at
// once; removed, it is no longer sent. The key is in the credential file
// (0600), and in no answer or log line.
func TestStoredKeyReachesProvider(t *testing.T) {
	t.Parallel()
	f, auths := keylessProvider(t)
	var logs bytes.Buffer
	cfg := app.Config{DBPath: filepath.Join(t.TempDir(), "agentd.db"), Host: "127.0.0.1", Version: "test",
		Directory: t.TempDir(), Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), AccessLog: true}
	cfg.Security.LoopbackOnly = true
	if err := cfg.Apply(f, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	a, err := app.Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Stop(t.Context()) })
	do := func(method, path, body string) []byte {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), method, a.URL()+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode/100 != 2 {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
		return b
	}
	var s struct{ ID string }
	json.Unmarshal(do("POST", "/session", "{}"), &s)
	prompt := func() string {
		t.Helper()
		do("POST", "/session/"+s.ID+"/message", `{"parts":[{"type":"text","text":"reply:hi"}]}`)
		auth := auths()
		return auth[len(auth)-1]
	}
	do("PUT", "/auth/keyless", `{"type":"api","key":"sk-stored-secret"}`)
	if got := prompt(); got != "Bearer sk-stored-secret" {
		t.Errorf("with a stored key the provider got %q", got)
	}
	do("DELETE", "/auth/keyless", "")
	if got := prompt(); strings.Contains(got, "sk-stored-secret") {
		t.Errorf("after DELETE the provider still got %q", got)
	}
	do("POST", "/api/integration/keyless/connect/key", `{"key":"sk-v2-secret","label":"ci"}`)
	if got := prompt(); got != "Bearer sk-v2-secret" {
		t.Errorf("with a key connected through opencode 2's API the provider got %q", got)
	}
	st, err := os.Stat(app.CredentialsFile(cfg.DBPath))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("credential file: %v %v, want mode 0600", st, err)
	}
	for _, p := range []string{"/config", "/config/providers", "/provider", "/api/integration", "/api/provider"} {
		if b := do("GET", p, ""); bytes.Contains(b, []byte("secret")) {
			t.Errorf("GET %s shows a stored key: %.300s", p, b)
		}
	}
	if strings.Contains(logs.String(), "secret") {
		t.Error("a stored key reached the log")
	}
}

// keylessProvider is a configuration whose default model is the fake
// model of an OpenAI-compatible provider that has no key of its own, and
// the Authorization headers its requests carried so far.
func keylessProvider(t *testing.T) (config.File, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var auth []string
	fake := fakellm.New(fakellm.Options{Second: 10 * time.Millisecond}).Handler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	var f config.File
	if err := json.Unmarshal([]byte(`{"model":"keyless/m","provider":{"keyless":{"npm":"@ai-sdk/openai-compatible",
		"options":{"baseURL":"`+hs.URL+`/v1"},"models":{"m":{}}}}}`), &f); err != nil {
		t.Fatal(err)
	}
	return f, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(auth)
	}
}
