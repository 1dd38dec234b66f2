package main

import (
	"context"
	"log/slog"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/server"
)

var tokenLine = regexp.MustCompile(`(?m)^agd_[0-9a-f]{16}_[A-Za-z0-9_-]{43}$`)

// status sends GET /session with a bearer token.
func bearerStatus(t *testing.T, url, token string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url+"/session", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestKeyCommand: keys made on the database before the server starts and
// through its API while it runs; listed, budgeted and revoked by name; the
// database refused while a server holds it.
func TestKeyCommand(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	db := filepath.Join(t.TempDir(), "agentd.db")
	r := c.mustRun("key", "create", "--name", "first", "--db", db, "--budget", "tokens=1_000,cost=$2.5")
	first := tokenLine.FindString(r.stdout)
	if first == "" || !strings.Contains(r.stdout, "made key first (key_") || !strings.Contains(r.stdout, "budget 1000 tokens and $2.5") {
		t.Fatalf("key create --db: %s", r)
	}
	if r := c.mustRun("key", "list", "--db", db); !strings.Contains(r.stdout, "first") || strings.Contains(r.stdout, first) {
		t.Errorf("key list --db: %s", r)
	}

	a, err := app.Start(context.Background(), app.Config{DBPath: db, Host: "127.0.0.1", Version: "test", Directory: t.TempDir(),
		Security: server.Security{LoopbackOnly: true, Password: "pw"}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Stop(context.Background()) })
	if code := bearerStatus(t, a.URL(), first); code != 200 {
		t.Fatalf("the key made on the database: %d", code)
	}
	if r := c.run("key", "create", "--name", "late", "--db", db); r.code != 1 || !strings.Contains(r.stderr, "leave out --db") {
		t.Errorf("the database while a server runs: %s", r)
	}
	c.setenv("AGENTD_URL="+a.URL(), "AGENTD_SERVER_PASSWORD=pw")
	r = c.mustRun("key", "create", "--name", "ci", "--sessions", "all")
	ci := tokenLine.FindString(r.stdout)
	if ci == "" || !strings.Contains(r.stdout, "sees all sessions") {
		t.Fatalf("key create through the API: %s", r)
	}
	if r := c.mustRun("key", "budget", "ci", "--budget", "cost=1"); !strings.Contains(r.stdout, "$1") {
		t.Errorf("key budget: %s", r)
	}
	if r := c.mustRun("key", "revoke", "ci"); !strings.Contains(r.stdout, "ci") {
		t.Errorf("key revoke: %s", r)
	}
	if code := bearerStatus(t, a.URL(), ci); code != 401 {
		t.Errorf("the revoked key: %d, want 401", code)
	}
	r = c.mustRun("key", "list")
	if !strings.Contains(r.stdout, "first") || !strings.Contains(r.stdout, "ci") || strings.Count(r.stdout, "\n") != 3 {
		t.Errorf("key list through the API: %s", r)
	}
	// A key cannot manage keys.
	c.setenv("AGENTD_API_KEY=" + first)
	if r := c.run("key", "list"); r.code != 1 || !strings.Contains(r.stderr, "403") {
		t.Errorf("key list with a key: %s", r)
	}
	for _, args := range [][]string{{"key", "revoke"}, {"key", "list", "x"}, {"key", "create", "--sessions", "some"}, {"key", "create", "--budget", "usd=3"}} {
		if r := c.run(args...); r.code != 2 {
			t.Errorf("%v: %s", args, r)
		}
	}
}

func TestParseBudget(t *testing.T) {
	for in, want := range map[string]core.Budget{"": {}, "none": {}, "tokens=5": {Tokens: 5}, "cost=$0.5,tokens=1_000": {Tokens: 1000, Cost: 0.5}} {
		if got, err := parseBudget(in); err != nil || got != want {
			t.Errorf("parseBudget(%q) = %+v, %v", in, got, err)
		}
	}
	for _, in := range []string{"5", "tokens=x", "cost=", "tokens=1,usd=2"} {
		if _, err := parseBudget(in); err == nil {
			t.Errorf("parseBudget(%q) accepted", in)
		}
	}
}
