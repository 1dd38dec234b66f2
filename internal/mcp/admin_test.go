package mcp_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/agentd/agentd/internal/mcp"
)

// TestDisconnectConnect: a disconnected server's tools are withdrawn and
// it stays down (no reconnection behind the client's back) until Connect,
// which brings it back; a server the configuration disables can be
// connected too.
func TestDisconnectConnect(t *testing.T) {
	t.Parallel()
	m := start(t, map[string]mcp.Server{
		"test": {Type: "local", Command: []string{serverBin}},
		"off":  {Type: "local", Command: []string{serverBin}, Enabled: new(false)},
	})
	if err := m.Disconnect("test"); err != nil {
		t.Fatal(err)
	}
	if st := m.Statuses()["test"]; st.Status != mcp.StatusDisabled {
		t.Fatalf("after Disconnect: %+v", st)
	}
	if n := names(m); len(n) != 0 {
		t.Fatalf("tools of a disconnected server: %v", n)
	}
	st, err := m.Connect(t.Context(), "test")
	if err != nil || st.Status != mcp.StatusConnected {
		t.Fatalf("Connect: %+v %v", st, err)
	}
	if n := names(m); !slices.Contains(n, "test_echo") {
		t.Fatalf("tools after Connect: %v", n)
	}
	if st, err := m.Connect(t.Context(), "off"); err != nil || st.Status != mcp.StatusConnected {
		t.Fatalf("Connect of a disabled server: %+v %v", st, err)
	}
	if res := call(t, t.Context(), m, "off_echo", `{"text":"on"}`); res.Output != "echo: on" {
		t.Errorf("echo of the server connected on request: %+v", res)
	}
	if _, err := m.Connect(t.Context(), "nope"); !errors.Is(err, mcp.ErrUnknown) {
		t.Errorf("Connect of an unknown server: %v", err)
	}
	if err := m.Disconnect("nope"); !errors.Is(err, mcp.ErrUnknown) {
		t.Errorf("Disconnect of an unknown server: %v", err)
	}
}

// TestAdd: a server added at run time is connected and offers its tools;
// a taken name, a bad configuration and a stopped manager are refused.
func TestAdd(t *testing.T) {
	t.Parallel()
	m := start(t, map[string]mcp.Server{"test": {Type: "local", Command: []string{serverBin}}})
	st, err := m.Add(t.Context(), "extra", mcp.Server{Type: "local", Command: []string{serverBin}})
	if err != nil || st.Status != mcp.StatusConnected {
		t.Fatalf("Add: %+v %v", st, err)
	}
	if res := call(t, t.Context(), m, "extra_echo", `{"text":"added"}`); res.Output != "echo: added" {
		t.Errorf("echo of the added server: %+v", res)
	}
	if _, err := m.Add(t.Context(), "test", mcp.Server{Type: "local", Command: []string{serverBin}}); !errors.Is(err, mcp.ErrExists) {
		t.Errorf("Add over a configured server: %v", err)
	}
	if _, err := m.Add(t.Context(), "bad", mcp.Server{Type: "remote", URL: "ftp://x"}); err == nil {
		t.Error("Add of a bad configuration succeeded")
	}
	m.Stop()
	if _, err := m.Add(t.Context(), "late", mcp.Server{Type: "local", Command: []string{serverBin}}); !errors.Is(err, mcp.ErrNotStarted) {
		t.Errorf("Add after Stop: %v", err)
	}
}
