package mcp_test

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/internal/mcp"
	"github.com/agentd/agentd/internal/tool"
)

var serverBin string

// TestMain builds the test MCP server (written with the same SDK) once.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "agentd-mcp-")
	if err != nil {
		panic(err)
	}
	serverBin = filepath.Join(dir, "testserver")
	if out, err := exec.Command("go", "build", "-o", serverBin, "./testserver").CombinedOutput(); err != nil {
		panic("build the test MCP server: " + err.Error() + "\n" + string(out))
	}
	code := func() int {
		defer os.RemoveAll(dir)
		return m.Run()
	}()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			panic(err)
		}
	}
	os.Exit(code)
}

func start(t *testing.T, servers map[string]mcp.Server) *mcp.Manager {
	t.Helper()
	m := mcp.New(mcp.Options{Servers: servers, Version: "test", Backoff: 50 * time.Millisecond})
	m.Start(t.Context())
	t.Cleanup(m.Stop)
	m.Tools() // waits for every server's first attempt
	return m
}

// TestStartDoesNotWait: a server that never answers does not hold Start
// (the node's listener waits for it); the first ask for tools does, up to
// the server's timeout.
func TestStartDoesNotWait(t *testing.T) {
	t.Parallel()
	m := mcp.New(mcp.Options{Servers: map[string]mcp.Server{"hung": {Type: "local", Command: []string{"sleep", "600"}, Timeout: 500}}})
	start := time.Now()
	m.Start(t.Context())
	defer m.Stop()
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("Start took %v", d)
	}
	if n := len(m.Tools()); n != 0 {
		t.Errorf("%d tools of a hung server", n)
	}
	if st := m.Statuses()["hung"]; st.Status != mcp.StatusFailed {
		t.Errorf("status = %+v", st)
	}
}

func call(t *testing.T, ctx context.Context, m *mcp.Manager, name, input string) tool.Result {
	t.Helper()
	for _, tl := range m.Tools() {
		if tl.Name() == name {
			res, err := tl.Run(ctx, tool.Call{Input: json.RawMessage(input)})
			if err != nil {
				t.Fatalf("%s: Go error %v", name, err)
			}
			return res
		}
	}
	t.Fatalf("no tool %s among %v", name, names(m))
	return tool.Result{}
}

func names(m *mcp.Manager) []string {
	var out []string
	for _, tl := range m.Tools() {
		out = append(out, tl.Name())
	}
	return out
}

// TestLocalServer: a local server's tools are offered as <server>_<tool>
// with their schemas; results, error results and cancellation arrive.
func TestLocalServer(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "calls.log")
	m := start(t, map[string]mcp.Server{"test": {Type: "local", Command: []string{serverBin, "-log", log}}})
	if st := m.Statuses()["test"]; st.Status != mcp.StatusConnected {
		t.Fatalf("status %+v", st)
	}
	if got := strings.Join(names(m), ","); got != "test_crash,test_echo,test_fail,test_sleep" {
		t.Errorf("tools %s", got)
	}
	for _, tl := range m.Tools() {
		if tl.Name() == "test_echo" && !strings.Contains(string(tl.Schema()), `"text"`) {
			t.Errorf("echo's schema %s", tl.Schema())
		}
	}
	if res := call(t, t.Context(), m, "test_echo", `{"text":"hi"}`); res.IsError || res.Output != "echo: hi" {
		t.Errorf("echo: %+v", res)
	}
	if res := call(t, t.Context(), m, "test_fail", `{}`); !res.IsError || !strings.Contains(res.Output, "on purpose") {
		t.Errorf("fail: %+v", res)
	}
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	call(t, ctx, m, "test_sleep", `{"seconds":60}`)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("a cancelled call returned after %s", took)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(log)
		if strings.Contains(string(b), "sleep cancelled") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server never saw the cancellation: %q", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServerRestarted: a server that dies is started again, and its tools
// come back.
func TestServerRestarted(t *testing.T) {
	t.Parallel()
	m := start(t, map[string]mcp.Server{"test": {Type: "local", Command: []string{serverBin}}})
	call(t, t.Context(), m, "test_crash", `{}`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if st := m.Statuses()["test"]; st.Status == mcp.StatusConnected && len(m.Tools()) == 4 {
			if res := call(t, t.Context(), m, "test_echo", `{"text":"again"}`); res.Output == "echo: again" {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server was not restarted: %+v", m.Statuses())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRemoteServer: a remote server over streamable HTTP gets the
// configured headers; without them it is reported failed, not fatal.
func TestRemoteServer(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(serverBin, "-http", addr, "-token", "s3cret")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for i := 0; i < 200; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	url := "http://" + addr + "/"
	m := start(t, map[string]mcp.Server{
		"remote": {Type: "remote", URL: url, Headers: map[string]string{"X-Token": "s3cret"}},
		"nokey":  {Type: "remote", URL: url, Timeout: 2000},
		"gone":   {Type: "local", Command: []string{filepath.Join(t.TempDir(), "no-such-server")}},
		"off":    {Type: "local", Command: []string{serverBin}, Enabled: new(false)},
	})
	st := m.Statuses()
	if st["remote"].Status != mcp.StatusConnected || st["nokey"].Status != mcp.StatusFailed || st["nokey"].Error == "" ||
		st["gone"].Status != mcp.StatusFailed || st["off"].Status != mcp.StatusDisabled {
		t.Errorf("statuses %+v", st)
	}
	if res := call(t, t.Context(), m, "remote_echo", `{"text":"over http"}`); res.Output != "echo: over http" {
		t.Errorf("remote echo: %+v", res)
	}
	for _, n := range names(m) {
		if !strings.HasPrefix(n, "remote_") {
			t.Errorf("tool %s of a server that is not connected", n)
		}
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s  mcp.Server
		ok bool
	}{
		{mcp.Server{Type: "local", Command: []string{"x"}}, true},
		{mcp.Server{Type: "local"}, false},
		{mcp.Server{Type: "remote", URL: "https://x"}, true},
		{mcp.Server{Type: "remote", URL: "ftp://x"}, false},
		{mcp.Server{Type: "other"}, false},
		{mcp.Server{Type: "local", Command: []string{"x"}, Timeout: -1}, false},
	} {
		if err := tc.s.Check(); (err == nil) != tc.ok {
			t.Errorf("%+v: %v", tc.s, err)
		}
	}
}

// TestLazy: a lazy manager starts no server until its tools are asked for.
func TestLazy(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "calls.log")
	m := mcp.New(mcp.Options{Lazy: true, Servers: map[string]mcp.Server{"test": {Type: "local", Command: []string{serverBin, "-log", log}}}})
	m.Start(t.Context())
	defer m.Stop()
	if st := m.Statuses()["test"]; st.Status != mcp.StatusFailed || !strings.Contains(st.Error, "not connected yet") {
		t.Errorf("lazy status before use: %+v", st)
	}
	if got := len(m.Tools()); got != 4 {
		t.Fatalf("%d tools on first use, want 4", got)
	}
	if st := m.Statuses()["test"]; st.Status != mcp.StatusConnected {
		t.Errorf("lazy status after use: %+v", st)
	}
	// A lazy manager stopped before any use starts nothing.
	idle := mcp.New(mcp.Options{Lazy: true, Servers: map[string]mcp.Server{"test": {Type: "local", Command: []string{serverBin}}}})
	idle.Start(t.Context())
	idle.Stop()
	if len(idle.Tools()) != 0 {
		t.Error("a stopped lazy manager connected")
	}
}

// BenchmarkCall is one MCP tool call (echo) over stdio and over streamable
// HTTP, through the SDK, to the test server.
func BenchmarkCall(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(serverBin, "-http", addr)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	for i := 0; i < 200; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, tc := range []struct {
		name string
		srv  mcp.Server
	}{
		{"stdio", mcp.Server{Type: "local", Command: []string{serverBin}}},
		{"http", mcp.Server{Type: "remote", URL: "http://" + addr + "/"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			m := mcp.New(mcp.Options{Servers: map[string]mcp.Server{"s": tc.srv}})
			m.Start(context.Background())
			defer m.Stop()
			var echo tool.Tool
			for _, t := range m.Tools() {
				if t.Name() == "s_echo" {
					echo = t
				}
			}
			if echo == nil {
				b.Fatalf("not connected: %+v", m.Statuses())
			}
			in := tool.Call{Input: json.RawMessage(`{"text":"x"}`)}
			b.ReportAllocs()
			for b.Loop() {
				if res, err := echo.Run(context.Background(), in); err != nil || res.IsError {
					b.Fatal(res, err)
				}
			}
		})
	}
}
