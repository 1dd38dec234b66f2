package opencode_test

import (
	"net/http"
	"strings"
	"testing"
)

// restConfig is the configuration exerciseRest needs: MCP servers that
// cannot be reached ("gone", "idle") and clients allowed to add remote
// ones.
const restConfig = `, "mcp": {"gone": {"type": "local", "command": ["/nonexistent/mcp-server"], "timeout": 2000},
	"idle": {"type": "remote", "url": "http://127.0.0.1:1/", "enabled": false, "timeout": 2000}},
	"agentd": {"mcp": {"add": "remote"}}`

// restEventTypes are the event types exerciseRest makes agentd send.
var restEventTypes = []string{"tui.prompt.append", "tui.command.execute", "tui.toast.show", "tui.session.select",
	"global.disposed", "mcp.tools.changed", "message.removed", "message.part.removed", "message.part.updated"}

// TestRestOperations drives the operations issue 37 added (TUI control,
// log, configuration, message and part edits, MCP management, the
// experimental lists and the refusals) with valid requests and judges
// every answer and event by opencode's document.
func TestRestOperations(t *testing.T) {
	n := startNode(t, restConfig)
	n.follow(t, "/event")
	n.follow(t, "/global/event")
	waitUntil(t, "the streams", func() bool { return n.app.Hub.Subscribers() >= 2 })
	exerciseRest(t, n)
	n.rec.waitEvents(t, restEventTypes)
	v := n.rec.check(t)
	for _, op := range []string{
		"POST /tui/append-prompt", "POST /tui/submit-prompt", "POST /tui/clear-prompt", "POST /tui/open-help",
		"POST /tui/open-sessions", "POST /tui/open-themes", "POST /tui/open-models", "POST /tui/execute-command",
		"POST /tui/show-toast", "POST /tui/publish", "POST /tui/select-session", "GET /tui/control/next",
		"POST /tui/control/response", "POST /log", "PATCH /config", "GET /global/config", "PATCH /global/config",
		"POST /global/dispose", "POST /global/upgrade", "DELETE /session/{sessionID}/message/{messageID}",
		"PATCH /session/{sessionID}/message/{messageID}/part/{partID}", "DELETE /session/{sessionID}/message/{messageID}/part/{partID}",
		"POST /mcp", "POST /mcp/{name}/connect", "POST /mcp/{name}/disconnect", "POST /mcp/{name}/auth",
		"DELETE /mcp/{name}/auth", "POST /mcp/{name}/auth/authenticate", "POST /mcp/{name}/auth/callback",
		"GET /experimental/session", "POST /experimental/session/{sessionID}/background", "GET /experimental/tool",
		"GET /experimental/tool/ids", "GET /experimental/console/orgs", "POST /experimental/workspace",
		"GET /experimental/workspace/adapter", "POST /experimental/workspace/sync-list", "POST /experimental/workspace/warp",
		"POST /provider/{providerID}/oauth/authorize", "POST /provider/{providerID}/oauth/callback", "POST /sync/start",
	} {
		if v.operations[op] == 0 {
			t.Errorf("%s was never judged", op)
		}
	}
	for _, typ := range restEventTypes {
		if v.eventTypes[typ] == 0 {
			t.Errorf("no %s event was seen", typ)
		}
	}
}

// exerciseRest calls each operation issue 37 added, with valid requests
// (and the refusals and errors opencode's document describes), checking
// the status of each. The node needs restConfig.
func exerciseRest(t *testing.T, n *node) {
	t.Helper()
	expect := func(want int, method, path string, body any) {
		t.Helper()
		if got := n.call(t, method, path, body, nil); got != want {
			t.Errorf("%s %s: %d, want %d", method, path, got, want)
		}
	}
	var s struct {
		ID string `json:"id"`
	}
	n.call(t, "POST", "/session", map[string]any{"title": "rest"}, &s)
	sp := "/session/" + s.ID
	expect(200, "POST", sp+"/message", map[string]any{"parts": []map[string]any{{"type": "text", "text": "reply:one"}, {"type": "text", "text": "a second part"}}})
	expect(200, "POST", sp+"/message", map[string]any{"parts": []map[string]any{{"type": "text", "text": "reply:two"}}})

	// The TUI routes.
	expect(200, "POST", "/tui/append-prompt", map[string]string{"text": "from the editor"})
	for _, p := range []string{"submit-prompt", "clear-prompt", "open-help", "open-sessions", "open-themes", "open-models"} {
		expect(200, "POST", "/tui/"+p, nil)
	}
	expect(200, "POST", "/tui/execute-command", map[string]string{"command": "session_new"})
	expect(200, "POST", "/tui/execute-command", map[string]string{"command": "model.list"})
	expect(400, "POST", "/tui/execute-command", map[string]string{"command": ""})
	expect(200, "POST", "/tui/show-toast", map[string]any{"title": "T", "message": "hello", "variant": "success", "duration": 500})
	expect(400, "POST", "/tui/show-toast", map[string]any{"message": "hello", "variant": "loud"})
	expect(200, "POST", "/tui/publish", map[string]any{"type": "tui.prompt.append", "properties": map[string]string{"text": "x"}})
	expect(200, "POST", "/tui/publish", map[string]any{"type": "tui.session.select", "properties": map[string]string{"sessionID": s.ID}})
	expect(400, "POST", "/tui/publish", map[string]any{"type": "tui.mystery", "properties": map[string]string{}})
	expect(200, "POST", "/tui/select-session", map[string]string{"sessionID": s.ID})
	expect(404, "POST", "/tui/select-session", map[string]string{"sessionID": "ses_doesnotexist"})
	expect(400, "POST", "/tui/select-session", map[string]string{"sessionID": "nope"})
	var next struct {
		Path string         `json:"path"`
		Body map[string]any `json:"body"`
	}
	if code := n.call(t, "GET", "/tui/control/next?timeout=5s", nil, &next); code != 200 || next.Path != "/tui/append-prompt" || next.Body["text"] != "from the editor" {
		t.Errorf("control/next: %d %+v, want the appended prompt first", code, next)
	}
	expect(200, "POST", "/tui/control/response", map[string]any{"ok": true})

	// A client's log line; the configuration, read-only.
	expect(200, "POST", "/log", map[string]any{"service": "editor", "level": "warn", "message": "hello", "extra": map[string]int{"n": 1}})
	expect(400, "POST", "/log", map[string]any{"service": "editor", "level": "loud", "message": "hello"})
	expect(200, "PATCH", "/config", map[string]any{})
	expect(403, "PATCH", "/config", map[string]any{"permission": map[string]string{"bash": "allow"}})
	expect(200, "GET", "/global/config", nil)
	expect(200, "PATCH", "/global/config", map[string]any{})
	expect(200, "POST", "/global/dispose", nil)
	var up struct {
		Success bool   `json:"success"`
		Error   string `json:"error"`
	}
	if code := n.call(t, "POST", "/global/upgrade", map[string]string{"target": "latest"}, &up); code != 200 || up.Success || up.Error == "" {
		t.Errorf("upgrade: %d %+v", code, up)
	}

	exerciseEdits(t, n, s.ID, expect)
	exerciseMCP(t, expect)

	// The experimental lists.
	expect(200, "GET", "/experimental/session", nil)
	expect(200, "GET", "/experimental/session?roots=true&limit=1", nil)
	expect(200, "POST", "/experimental/session/"+s.ID+"/background", nil)
	expect(404, "POST", "/experimental/session/ses_doesnotexist/background", nil)
	expect(200, "GET", "/experimental/tool?provider=agentd&model=scripted", nil)
	expect(200, "GET", "/experimental/tool/ids", nil)

	// What agentd does not have: answered in opencode's shape, or
	// refused with a reason.
	expect(200, "GET", "/experimental/console/orgs", nil)
	expect(501, "POST", "/experimental/console/switch", map[string]string{"accountID": "a", "orgID": "o"})
	expect(400, "POST", "/experimental/workspace", map[string]string{"type": "worktree"})
	expect(200, "GET", "/experimental/workspace/adapter", nil)
	expect(204, "POST", "/experimental/workspace/sync-list", nil)
	expect(204, "POST", "/experimental/workspace/warp", map[string]any{"id": nil, "sessionID": s.ID})
	expect(404, "POST", "/experimental/workspace/warp", map[string]any{"id": "wrk_x", "sessionID": s.ID})
	expect(404, "DELETE", "/experimental/workspace/wrk_x", nil)
	expect(400, "POST", "/provider/fake/oauth/authorize", map[string]any{"method": 0})
	expect(400, "POST", "/provider/fake/oauth/callback", map[string]any{"method": 0, "code": "c"})
	expect(200, "POST", "/sync/start", nil)
	for _, p := range []string{"history", "replay", "steal"} {
		expect(501, "POST", "/sync/"+p, map[string]any{})
	}
}

// exerciseEdits edits and deletes the session's messages and parts, and
// is refused while a run is active.
func exerciseEdits(t *testing.T, n *node, sid string, expect func(int, string, string, any)) {
	t.Helper()
	sp := "/session/" + sid
	msgs := n.transcript(t, sid)
	user, answer := msgs[0], msgs[1]
	part := func(p any) string {
		return strings.Join([]string{sp, "message", user.Info.ID, "part", p.(string)}, "/")
	}
	edited := map[string]any{"id": user.Parts[0].ID, "sessionID": sid, "messageID": user.Info.ID, "type": "text", "text": "reply:uno"}
	expect(200, "PATCH", part(user.Parts[0].ID), edited)
	expect(400, "PATCH", part(user.Parts[0].ID), map[string]any{"type": "reasoning", "text": "x"})
	expect(200, "DELETE", part(user.Parts[1].ID), nil)
	expect(404, "DELETE", part(user.Parts[1].ID), nil)
	for _, p := range answer.Parts {
		if p.Type == "step-start" {
			expect(400, "DELETE", strings.Join([]string{sp, "message", answer.Info.ID, "part", p.ID}, "/"), nil)
		}
	}
	expect(200, "DELETE", sp+"/message/"+answer.Info.ID, nil)
	expect(404, "DELETE", sp+"/message/"+answer.Info.ID, nil)

	// Nothing changes while a run reads the history.
	expect(204, "POST", sp+"/prompt_async", map[string]any{"parts": []map[string]any{{"type": "text", "text": "sleep:30"}}})
	waitUntil(t, "busy", func() bool {
		var st map[string]any
		n.call(t, "GET", "/session/status", nil, &st)
		return st[sid] != nil
	})
	expect(409, "DELETE", sp+"/message/"+user.Info.ID, nil)
	expect(409, "PATCH", part(user.Parts[0].ID), edited)
	expect(200, "POST", sp+"/abort", nil)
}

// exerciseMCP adds, connects and disconnects MCP servers (restConfig's).
func exerciseMCP(t *testing.T, expect func(int, string, string, any)) {
	t.Helper()
	expect(200, "POST", "/mcp", map[string]any{"name": "added", "config": map[string]any{"type": "remote", "url": "http://127.0.0.1:1/", "enabled": false}})
	expect(409, "POST", "/mcp", map[string]any{"name": "idle", "config": map[string]any{"type": "remote", "url": "http://127.0.0.1:1/"}})
	expect(403, "POST", "/mcp", map[string]any{"name": "mine", "config": map[string]any{"type": "local", "command": []string{"sh"}}})
	expect(200, "POST", "/mcp/idle/connect", nil)
	expect(200, "POST", "/mcp/gone/disconnect", nil)
	expect(404, "POST", "/mcp/nope/connect", nil)
	expect(400, "POST", "/mcp/idle/auth", nil)
	expect(200, "DELETE", "/mcp/idle/auth", nil)
	expect(400, "POST", "/mcp/idle/auth/authenticate", nil)
	expect(400, "POST", "/mcp/idle/auth/callback", map[string]string{"code": "c"})
	expect(http.StatusNotFound, "DELETE", "/mcp/nope/auth", nil)
}
