package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestRunUsesTheServerHoldingTheDatabase: `agentd run` beside a running
// `agentd serve` on the same database sends the prompt to that server,
// with the password the client commands use, and says so on stderr.
func TestRunUsesTheServerHoldingTheDatabase(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.setenv("AGENTD_SERVER_PASSWORD=s3cret")
	db := filepath.Join(t.TempDir(), "agentd.db")
	srv := c.serve("--port", "0", "--db", db)
	r := c.run("run", "--db", db, "reply:through the server")
	if r.code != 0 || !strings.Contains(r.stdout, "through the server") ||
		!strings.Contains(r.stderr, "using the server at "+srv.url) {
		t.Fatalf("run beside serve: %s\nserver log:\n%s", r, srv.logText())
	}
	// The run went through the server: its session is in its list.
	if r := c.mustRun("sessions", "--url", srv.url); !strings.Contains(r.stdout, "succeeded") {
		t.Errorf("the server's sessions: %s", r)
	}
	if code := srv.stop(); code != 0 {
		t.Errorf("serve exit %d:\n%s", code, srv.logText())
	}
	// With no server, run uses its own on the same database.
	r = c.mustRun("run", "--db", db, "reply:on my own")
	if strings.Contains(r.stderr, "using the server") || !strings.Contains(r.stdout, "on my own") {
		t.Errorf("run without a server: %s", r)
	}
}
