package opencode_test

import (
	"testing"

	"github.com/agentd/agentd/internal/core"
)

// TestTUIControl drives opencode's TUI, attached to agentd under tmux,
// from an HTTP client as an editor plugin does: a toast shows, a selected
// session opens, text appended to the prompt shows there and
// submit-prompt sends it (the session gets the prompt and its answer), a
// command starts a new session and another opens the session list.
func TestTUIControl(t *testing.T) {
	n := startNode(t, "")
	var earlier struct {
		ID string `json:"id"`
	}
	n.call(t, "POST", "/session", map[string]any{"title": "an earlier session"}, &earlier)
	n.call(t, "POST", "/session/"+earlier.ID+"/message", map[string]any{"parts": []map[string]any{{"type": "text", "text": "reply:answered before the editor asked"}}}, nil)

	u := startTUI(t, n)
	u.waitFor("its prompt", "Ask anything")
	// The TUI's event stream is open: what is published from now on
	// reaches it.
	waitUntil(t, "the TUI's event stream", func() bool { return n.app.Hub.Subscribers() >= 1 })

	send := func(path string, body any) {
		t.Helper()
		var ok bool
		if code := n.call(t, "POST", path, body, &ok); code != 200 || !ok {
			t.Fatalf("POST %s: %d %v", path, code, ok)
		}
	}
	send("/tui/show-toast", map[string]any{"title": "Editor", "message": "hello from the editor", "variant": "info"})
	u.waitFor("the toast", "hello from the editor")

	send("/tui/select-session", map[string]string{"sessionID": earlier.ID})
	u.waitFor("the selected session", "answered before the editor asked")

	send("/tui/append-prompt", map[string]string{"text": "reply:sent by the editor"})
	u.waitFor("the appended prompt", "reply:sent by the editor")
	send("/tui/submit-prompt", nil)
	waitUntil(t, "the submitted prompt in the selected session", func() bool {
		got := texts(n.transcript(t, earlier.ID), core.RoleUser)
		return len(got) == 2 && got[1] == "reply:sent by the editor"
	})
	n.call(t, "POST", "/session/"+earlier.ID+"/wait?timeout=30s", nil, nil)
	if got := texts(n.transcript(t, earlier.ID), core.RoleAssistant); len(got) != 2 || got[1] != "sent by the editor" {
		t.Errorf("answers in the session = %q", got)
	}

	send("/tui/execute-command", map[string]string{"command": "session_new"})
	u.waitFor("a new session", "Ask anything")

	send("/tui/open-sessions", nil)
	u.waitFor("the session list", "Sessions", "an earlier session")
	u.keys("Escape")

	n.rec.mu.Lock()
	for _, ex := range n.rec.exchanges {
		if ex.status == 404 || ex.status >= 500 {
			t.Errorf("%s %s was answered %d: %s", ex.method, ex.path, ex.status, ex.body)
		}
	}
	n.rec.mu.Unlock()
	n.rec.check(t)
}
