package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/llm"
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

// TestClientCommandsSpeakPlainly: wait prints words (JSON on request),
// abort of an idle session says so and exits 3, a mistyped command gets
// the closest, and a bad --url or a server gone mid-wait is a sentence,
// not Go's request text.
func TestClientCommandsSpeakPlainly(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	srv := c.serve("--port", "0", "--db", filepath.Join(t.TempDir(), "agentd.db"))
	c.mustRun("run", "--url", srv.url, "reply:hi")
	var list []struct{ ID string }
	if err := json.Unmarshal([]byte(c.mustRun("sessions", "--url", srv.url, "--json").stdout), &list); err != nil || len(list) != 1 {
		t.Fatalf("sessions: %v %v", list, err)
	}
	id := list[0].ID
	r := c.mustRun("wait", "--url", srv.url, id)
	if !strings.HasPrefix(r.stdout, id+": idle") || !strings.Contains(r.stdout, "succeeded") {
		t.Errorf("wait: %s", r)
	}
	r = c.mustRun("wait", "--url", srv.url, "--json", id)
	var st map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st["type"] != "idle" {
		t.Errorf("wait --json: %s (%v)", r, err)
	}
	r = c.run("abort", "--url", srv.url, id)
	if r.code != 3 || !strings.Contains(r.stderr, "is idle: there is no run to abort") {
		t.Errorf("abort of an idle session: %s", r)
	}
	if r := c.run("abort", "--url", srv.url, "--json", id); r.code != 3 || r.stdout != "false\n" {
		t.Errorf("abort --json of an idle session: %s", r)
	}
	if r := c.run("wiat", id); r.code != 2 || !strings.Contains(r.stderr, `unknown command "wiat"; did you mean "agentd wait"?`) {
		t.Errorf("a mistyped command: %s", r)
	}
	for _, u := range []string{"localhost:4096", "htp://127.0.0.1:4096", "http://[::1"} {
		r := c.run("status", "--url", u, id)
		if r.code != 1 || !strings.Contains(r.stderr, "is not a server address") || strings.Contains(r.stderr, `Get "`) {
			t.Errorf("--url %s: %s", u, r)
		}
	}
	// A wait whose server goes away (killed) mid-wait.
	resp, err := http.Post(srv.url+"/session/"+id+"/prompt_async", "application/json",
		strings.NewReader(`{"parts":[{"type":"text","text":"sleep:600"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	wait := c.command(context.Background(), "wait", "--url", srv.url, id)
	var stderr strings.Builder
	wait.Stderr = &stderr
	if err := wait.Start(); err != nil {
		t.Fatal(err)
	}
	_ = srv.cmd.Process.Kill()
	_ = wait.Wait() // its exit code is checked below
	if code := wait.ProcessState.ExitCode(); code != 1 || strings.Contains(stderr.String(), `Post "`) ||
		!strings.Contains(stderr.String(), "agentd: ") {
		t.Errorf("wait on a killed server: exit %d: %s", code, stderr.String())
	}
}

// TestProviderMistakesNameTheFix: each provider mistake a newcomer makes
// is refused in a line that says what to do.
func TestProviderMistakesNameTheFix(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	// A model of Anthropic's with no key: on the configuration path as on
	// the --model path.
	c.write("agentd.json", `{"model": "anthropic/claude-sonnet-4-5"}`)
	r := c.run("run", "reply:hi")
	if r.code != 1 || !strings.Contains(r.stderr, `provider "anthropic" is not configured: set ANTHROPIC_API_KEY`) {
		t.Errorf("configured anthropic model without a key: %s", r)
	}
	c.write("agentd.json", `{}`)
	r = c.run("run", "--model", "anthropic/claude-sonnet-4-5", "reply:hi")
	if r.code != 1 || !strings.Contains(r.stderr, "set ANTHROPIC_API_KEY") {
		t.Errorf("--model anthropic/… without a key: %s", r)
	}
	// A provider block without a key: config check warns, with the fix.
	c.write("agentd.json", `{"provider": {"anthropic": {}}}`)
	r = c.run("config", "check")
	if r.code != 0 || !strings.Contains(r.stdout, "warning: provider anthropic has no API key: set ANTHROPIC_API_KEY") ||
		!strings.Contains(r.stdout, "ok, with 1 warning(s) above") {
		t.Errorf("config check of a provider without a key: %s", r)
	}
	// A mistyped provider and model.
	c.write("agentd.json", `{"provider": {"local": {"options": {"baseURL": "http://127.0.0.1:1/v1"}, "models": {"qwen2.5-coder": {}}}}}`)
	r = c.run("run", "--model", "lcoal/qwen2.5-coder", "reply:hi")
	if r.code != 1 || !strings.Contains(r.stderr, `unknown provider "lcoal" (did you mean "local"? known: agentd, anthropic, local, openai)`) {
		t.Errorf("a mistyped provider: %s", r)
	}
	r = c.run("run", "--model", "local/qwen2.5-coderr", "reply:hi")
	if r.code != 1 || !strings.Contains(r.stderr, `did you mean "qwen2.5-coder"?`) {
		t.Errorf("a mistyped model: %s", r)
	}
	// A model server that is not running: a few quick tries, then one
	// line, not a minute of retries.
	r = c.run("run", "--model", "local/qwen2.5-coder", "reply:hi")
	if r.code != 1 || !strings.Contains(r.stderr, "cannot reach http://127.0.0.1:1: connection refused; is the model server running?") ||
		strings.Count(r.stderr, "↻ retry") >= llm.RefusedAttempts {
		t.Errorf("a refused baseURL: %s", r)
	}
}

// TestPortInUseBeforeTheDatabase: a port in use is said in a line with
// what to do, before any database is created.
func TestPortInUseBeforeTheDatabase(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	srv := c.serve("--port", "0", "--db", filepath.Join(t.TempDir(), "first.db"))
	u, err := url.Parse(srv.url)
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "second.db")
	r := c.run("serve", "--port", u.Port(), "--db", db)
	if r.code != 1 || !strings.Contains(r.stderr, "port "+u.Port()+" on 127.0.0.1 is in use: an agentd") ||
		!strings.Contains(r.stderr, "--port") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Errorf("a port in use: %s", r)
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Errorf("the database was created before the port was checked: %v", err)
	}
}

// TestShutdownAndStartSayWhatBecameOfRuns: stopping logs the runs it
// handed off and how long it took; the next start logs what it did with
// them.
func TestShutdownAndStartSayWhatBecameOfRuns(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	db := filepath.Join(t.TempDir(), "agentd.db")
	srv := c.serve("--port", "0", "--db", db)
	resp, err := http.Post(srv.url+"/session", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	var s struct{ ID string }
	_ = json.NewDecoder(resp.Body).Decode(&s)
	resp.Body.Close()
	resp, err = http.Post(srv.url+"/session/"+s.ID+"/prompt_async", "application/json",
		strings.NewReader(`{"parts":[{"type":"text","text":"sleep:600"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// The run is executing once the session reads busy.
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(c.mustRun("status", "--url", srv.url, s.ID).stdout, "busy") {
		if time.Now().After(deadline) {
			t.Fatal("the run never started")
		}
	}
	if code := srv.stop(); code != 0 {
		t.Fatalf("serve exit %d:\n%s", code, srv.logText())
	}
	log := srv.logText()
	run := regexp.MustCompile(`engine stopped: runs handed off"[^\n]* count=1 runs=(run_\S+) next="the next start resumes them" took=`).FindStringSubmatch(log)
	if run == nil || !regexp.MustCompile(`msg=stopped took=\S+`).MatchString(log) {
		t.Fatalf("the shutdown log:\n%s", log)
	}
	srv = c.serve("--port", "0", "--db", db)
	if !regexp.MustCompile(`msg="runs left by the previous process"[^\n]* resumed=1 resumed_runs=` + run[1]).MatchString(srv.logText()) {
		t.Errorf("the start log:\n%s", srv.logText())
	}
}
