package opencode_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
)

// eventTypesEmitted are the event types the scenario must make agentd
// emit.
var eventTypesEmitted = []string{
	"server.connected", "server.heartbeat", "session.created", "session.updated", "session.deleted",
	"session.status", "session.idle", "session.error", "message.updated", "message.part.updated",
	"message.part.delta", "permission.asked", "permission.replied", "run.updated", "session.compacted",
	"todo.updated", "message.removed", "message.part.removed", "session.diff", "question.asked",
	"question.replied", "question.rejected", "revert.updated",
	"pty.created", "pty.updated", "pty.exited", "pty.deleted",
}

// TestSchema drives every opencode route agentd serves, and every kind of
// run (text, reasoning, tools, a file part, retries, failure, abort,
// permissions), through a recorder, then judges each answer and each
// event by opencode's own OpenAPI document.
func TestSchema(t *testing.T) {
	n := startNode(t, `, "permission": {"bash": "ask"}, "command": {"greet": {"template": "reply:hello $ARGUMENTS", "description": "Greets"}},
		"agentd": {"questions": true, "terminal": {"enabled": true}, "mcp": {"add": "remote"}},
		"mcp": {"missing": {"type": "local", "command": ["/nonexistent/mcp-server"], "timeout": 2000}, "off": {"type": "remote", "url": "http://127.0.0.1:1/", "enabled": false},
			"gone": {"type": "local", "command": ["/nonexistent/mcp-server"], "timeout": 2000}, "idle": {"type": "remote", "url": "http://127.0.0.1:1/", "enabled": false, "timeout": 2000}}`)
	n.follow(t, "/event")
	n.follow(t, "/global/event")
	n.follow(t, "/event?after=0")

	type session struct {
		ID string `json:"id"`
	}
	var s session
	if code := n.call(t, "POST", "/session", map[string]any{"title": "schema", "agent": "build",
		"model": map[string]string{"providerID": "agentd", "id": "scripted"}}, &s); code != 200 {
		t.Fatalf("create session: %d", code)
	}
	sp := "/session/" + s.ID
	var child session
	n.call(t, "POST", "/session", map[string]any{"parentID": s.ID}, &child)

	prompt := func(text string, extra map[string]any) int {
		body := map[string]any{"parts": []map[string]any{{"type": "text", "text": text}}}
		for k, v := range extra {
			body[k] = v
		}
		return n.call(t, "POST", sp+"/message", body, nil)
	}
	if code := prompt("reasoning:let me think\nreply:hello there", nil); code != 200 {
		t.Fatalf("prompt: %d", code)
	}
	if code := prompt(`tool:read:{"filePath":"hello.txt"}`+"\n"+`tool:glob:{"pattern":"*.txt"}`+"\n"+
		`tool:todowrite:{"todos":[{"id":"1","content":"judge the schema","status":"in_progress","priority":"high"}]}`, nil); code != 200 {
		t.Fatalf("tool prompt: %d", code)
	}
	if code := prompt(`tool:task:{"description":"ask a subagent","prompt":"reply:from the child","subagent_type":"general"}`+"\nreply:parent", nil); code != 200 {
		t.Fatalf("task prompt: %d", code)
	}
	if code := prompt("usage:10,5,3,2\nreply:through the provider", map[string]any{
		"model": map[string]string{"providerID": "fake", "modelID": "fake-model"}}); code != 200 {
		t.Fatalf("provider prompt: %d", code)
	}
	if code := prompt("fail:503x1\nreply:after a retry", nil); code != 200 {
		t.Fatalf("retried prompt: %d", code)
	}
	// As opencode answers it: 200, the error in the message.
	if code := prompt("fail:400", nil); code != http.StatusOK {
		t.Fatalf("failing prompt answered %d, want 200 with the error in the message", code)
	}
	file := map[string]any{"parts": []map[string]any{
		{"type": "text", "text": "reply:got the file"},
		{"type": "file", "mime": "text/plain", "filename": "note.txt", "url": "data:text/plain;base64," + base64.StdEncoding.EncodeToString([]byte("note"))},
	}}
	n.call(t, "POST", sp+"/message", file, nil)

	// A compaction on demand, and a prompt answered from its summary.
	var summarized bool
	if code := n.call(t, "POST", sp+"/summarize", map[string]string{"providerID": "agentd", "modelID": "scripted"}, &summarized); code != 200 || !summarized {
		t.Fatalf("summarize: %d %v", code, summarized)
	}
	prompt("reply:after the summary", nil)

	// A run aborted while busy; the opencode status list sees it busy.
	if code := n.call(t, "POST", sp+"/prompt_async", map[string]any{"parts": []map[string]any{{"type": "text", "text": "sleep:30"}}}, nil); code != 204 {
		t.Fatalf("prompt_async: %d", code)
	}
	waitUntil(t, "busy", func() bool {
		var st map[string]map[string]any
		n.call(t, "GET", "/session/status", nil, &st)
		return st[s.ID]["type"] == "busy"
	})
	var aborted bool
	n.call(t, "POST", sp+"/abort", nil, &aborted)
	if !aborted {
		t.Fatal("abort answered false")
	}

	// Permissions: bash asks; one answer through each route.
	for _, route := range []string{"v2", "v1"} {
		n.call(t, "POST", sp+"/prompt_async", map[string]any{"parts": []map[string]any{{"type": "text", "text": `tool:bash:{"command":"echo hi"}`}}}, nil)
		var pending []struct {
			ID string `json:"id"`
		}
		waitUntil(t, "a permission request", func() bool {
			n.call(t, "GET", "/permission", nil, &pending)
			return len(pending) > 0
		})
		if route == "v2" {
			n.call(t, "POST", "/permission/"+pending[0].ID+"/reply", map[string]string{"reply": "once"}, nil)
		} else {
			n.call(t, "POST", sp+"/permissions/"+pending[0].ID, map[string]string{"response": "reject"}, nil)
		}
		waitUntil(t, "idle", func() bool {
			var st map[string]any
			n.call(t, "GET", "/session/status", nil, &st)
			return st[s.ID] == nil
		})
	}

	// Snapshots, diff, undo and redo, fork, the user's shell.
	if code := prompt(`tool:write:{"filePath":"made.txt","content":"one\n"}`+"\n"+`tool:write:{"filePath":"made.txt","content":"two\n"}`+"\nreply:written", nil); code != 200 {
		t.Fatalf("write prompt: %d", code)
	}
	var turns []struct {
		Info struct {
			ID   string `json:"id"`
			Role string `json:"role"`
		} `json:"info"`
		Parts []struct {
			ID   string `json:"id"`
			Type string `json:"type"`
		} `json:"parts"`
	}
	n.call(t, "GET", sp+"/message", nil, &turns)
	write := turns[len(turns)-4] // the prompt, then its three steps
	var writeStep string
	for _, p := range turns[len(turns)-2].Parts {
		if p.Type == "patch" {
			writeStep = p.ID
		}
	}
	n.call(t, "GET", sp+"/diff", nil, nil)
	n.call(t, "GET", sp+"/diff?messageID="+write.Info.ID, nil, nil)
	if code := n.call(t, "POST", sp+"/revert", map[string]string{"messageID": turns[len(turns)-2].Info.ID, "partID": writeStep}, nil); code != 200 {
		t.Errorf("revert to a part: %d", code)
	}
	if code := n.call(t, "POST", sp+"/unrevert", nil, nil); code != 200 {
		t.Errorf("unrevert: %d", code)
	}
	if code := n.call(t, "POST", sp+"/revert", map[string]string{"messageID": turns[len(turns)-2].Info.ID, "partID": writeStep}, nil); code != 200 {
		t.Errorf("revert: %d", code)
	}
	prompt("reply:after the undo", nil) // retires what was reverted (message.part.removed, message.removed)
	if code := n.call(t, "POST", sp+"/revert", map[string]string{"messageID": write.Info.ID}, nil); code != 200 {
		t.Errorf("revert a turn: %d", code)
	}
	prompt("reply:after undoing a turn", nil)
	n.call(t, "POST", sp+"/revert", map[string]string{"messageID": "msg_doesnotexist"}, nil)
	n.call(t, "POST", sp+"/fork", map[string]string{}, nil)
	n.call(t, "POST", sp+"/fork", map[string]string{"messageID": write.Info.ID}, nil)
	n.call(t, "POST", "/session/ses_doesnotexist/fork", map[string]string{}, nil)
	if code := n.call(t, "POST", sp+"/shell", map[string]string{"agent": "build", "command": "echo from the shell"}, nil); code != 200 {
		t.Errorf("shell: %d", code)
	}
	if code := n.call(t, "POST", sp+"/init", map[string]string{}, nil); code != 200 {
		t.Errorf("init: %d", code)
	}

	// Questions: one answered, one dismissed.
	for _, reply := range []string{"reply", "reject"} {
		n.call(t, "POST", sp+"/prompt_async", map[string]any{"parts": []map[string]any{{"type": "text", "text": `tool:question:{"questions":[{"question":"Which?","header":"Pick","options":[{"label":"A","description":"the first"}]}]}` + "\nreply:ok"}}}, nil)
		var asked []struct {
			ID string `json:"id"`
		}
		waitUntil(t, "a question", func() bool {
			n.call(t, "GET", "/question", nil, &asked)
			return len(asked) > 0
		})
		n.call(t, "POST", "/question/"+asked[0].ID+"/"+reply, map[string]any{"answers": [][]string{{"A"}}}, nil)
		waitUntil(t, "idle", func() bool {
			var st map[string]any
			n.call(t, "GET", "/session/status", nil, &st)
			return st[s.ID] == nil
		})
	}
	n.call(t, "POST", "/question/que_doesnotexist/reply", map[string]any{"answers": [][]string{}}, nil)
	if code := n.call(t, "POST", sp+"/share", nil, nil); code != 400 {
		t.Errorf("share: %d, want 400 (not available)", code)
	}
	n.call(t, "DELETE", sp+"/share", nil, nil)

	judgeProjects(t, n)
	schemaTerminals(t, n)

	// Reads.
	var msgs []struct {
		Info struct {
			ID string `json:"id"`
		} `json:"info"`
	}
	n.call(t, "GET", sp+"/message", nil, &msgs)
	n.call(t, "GET", sp+"/message?limit=2", nil, nil)
	for _, m := range msgs {
		n.call(t, "GET", sp+"/message/"+m.Info.ID, nil, nil)
	}
	if code := n.call(t, "POST", sp+"/command", map[string]any{"command": "greet", "arguments": "schema"}, nil); code != 200 {
		t.Errorf("POST %s/command: %d", sp, code)
	}
	n.call(t, "POST", sp+"/command", map[string]any{"command": "nope", "arguments": ""}, nil)
	n.call(t, "PATCH", sp, map[string]any{"title": "renamed"}, nil)
	for _, p := range []string{
		"/global/health", "/session", "/session?roots=true&limit=5", "/session?search=sch&start=1", sp, sp + "/children",
		sp + "/todo", sp + "/diff", "/session/status", "/permission", "/config", "/config/providers", "/provider",
		"/agent", "/path", "/project/current", "/project/global/directories", "/vcs", "/command", "/lsp",
		"/formatter", "/mcp", "/provider/auth", "/experimental/capabilities", "/experimental/console",
		"/experimental/resource", "/experimental/workspace", "/experimental/workspace/status",
		"/api/location", "/api/agent", "/api/model", "/api/provider", "/api/integration", "/api/reference",
		"/api/command", "/api/skill", "/find?pattern=hello", "/find/file?query=hel", "/find/file?query=&dirs=true",
		"/find/symbol?query=main", "/file?path=.", "/file/content?path=hello.txt", "/file/status",
		"/api/fs/find?query=hel", "/api/fs/list?path=.", "/question", "/vcs/status", "/vcs/diff?mode=git", "/vcs/diff/raw",
	} {
		if code := n.call(t, "GET", p, nil, nil); code != 200 {
			t.Errorf("GET %s: %d", p, code)
		}
	}
	// Not a repository: opencode's VcsApplyError (non-git).
	if code := n.call(t, "POST", "/vcs/apply", map[string]any{"patch": "diff --git a/x b/x\n"}, nil); code != 400 {
		t.Errorf("POST /vcs/apply outside a repository: %d", code)
	}
	// Errors opencode's document describes.
	n.call(t, "GET", "/session/ses_doesnotexist", nil, nil)
	n.call(t, "GET", "/session/ses_doesnotexist/message", nil, nil)
	n.call(t, "POST", sp+"/message", map[string]any{"parts": 5}, nil)
	n.call(t, "GET", "/session?limit=abc", nil, nil)
	// The credential store: the TUI's /connect with an API key.
	if code := n.call(t, "PUT", "/auth/fake", map[string]string{"type": "api", "key": "sk-schema"}, nil); code != 200 {
		t.Errorf("PUT /auth/fake: %d", code)
	}
	n.call(t, "PUT", "/auth/fake", map[string]any{"type": "oauth", "refresh": "r", "access": "a", "expires": 1}, nil)
	n.call(t, "DELETE", "/auth/fake", nil, nil)
	if code := n.call(t, "POST", "/instance/dispose", nil, nil); code != 200 {
		t.Errorf("instance/dispose: %d", code)
	}

	// The operations issue 37 added (see rest_test.go).
	exerciseRest(t, n)

	var deleted bool
	n.call(t, "DELETE", "/session/"+child.ID, nil, &deleted)
	if !deleted {
		t.Fatal("delete answered false")
	}
	n.rec.waitEvents(t, eventTypesEmitted) // heartbeats (every 200 ms) and the last events

	v := n.rec.check(t)
	for _, typ := range eventTypesEmitted {
		if v.eventTypes[typ] == 0 {
			t.Errorf("no %s event was seen; seen: %v", typ, sortedKeys(v.eventTypes))
		}
	}
	// Every opencode route agentd serves was judged at least once.
	var ours struct {
		Paths map[string]map[string]struct {
			Tags      []string                   `json:"tags"`
			Responses map[string]json.RawMessage `json:"responses"`
		} `json:"paths"`
	}
	n.call(t, "GET", "/doc", nil, &ours)
	for p, item := range ours.Paths {
		for m, op := range item {
			if !slices.Contains(op.Tags, "opencode") || p == "/doc" || strings.HasSuffix(p, "event") || !succeeds(op.Responses) {
				continue
			}
			tmpl, ok := doc.route(strings.ToUpper(m), strings.NewReplacer("{id}", "ses_x", "{messageID}", "msg_x",
				"{requestID}", "per_x", "{permissionID}", "per_x", "{projectID}", "global", "{partID}", "prt_x", "{name}", "x",
				"{providerID}", "x").Replace(p))
			if !ok {
				t.Errorf("%s %s is tagged opencode but opencode's document has no such route", strings.ToUpper(m), p)
				continue
			}
			if v.operations[strings.ToUpper(m)+" "+tmpl] == 0 {
				t.Errorf("%s %s was never judged", strings.ToUpper(m), tmpl)
			}
		}
	}
	t.Logf("judged %d operations and %d event types", len(v.operations), len(v.eventTypes))
}

// schemaTerminals drives the terminal routes: one terminal that exits by
// itself, one removed while it runs.
func schemaTerminals(t *testing.T, n *node) {
	t.Helper()
	var running, done struct {
		ID string `json:"id"`
	}
	if code := n.call(t, "POST", "/pty", map[string]any{"command": "/bin/sh", "args": []string{"-c", "read x"}, "title": "schema"}, &running); code != 200 {
		t.Fatalf("create a terminal: %d", code)
	}
	n.call(t, "POST", "/pty", map[string]any{"command": "/bin/sh", "args": []string{"-c", "exit 0"}}, &done)
	waitUntil(t, "the terminal's exit", func() bool {
		var info struct{ Status string }
		n.call(t, "GET", "/pty/"+done.ID, nil, &info)
		return info.Status == "exited"
	})
	for _, p := range []string{"/pty", "/pty/shells", "/pty/" + running.ID} {
		if code := n.call(t, "GET", p, nil, nil); code != 200 {
			t.Errorf("GET %s: %d", p, code)
		}
	}
	n.call(t, "GET", "/pty/pty_doesnotexist", nil, nil)
	n.call(t, "PUT", "/pty/"+running.ID, map[string]any{"title": "renamed", "size": map[string]int{"rows": 30, "cols": 100}}, nil)
	req, _ := http.NewRequestWithContext(t.Context(), "POST", n.rec.URL()+"/pty/"+running.ID+"/connect-token", nil)
	req.Header.Set("x-opencode-ticket", "1")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Errorf("connect-token: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	n.call(t, "GET", "/pty/"+running.ID+"/connect", nil, nil) // not a websocket: 400
	for _, id := range []string{running.ID, done.ID} {
		if code := n.call(t, "DELETE", "/pty/"+id, nil, nil); code != 200 {
			t.Errorf("DELETE /pty/%s: %d", id, code)
		}
	}
}

// TestSchemaJudges pins the judge: shapes agentd used to send, which
// opencode's schema forbids, must be refused.
func TestSchemaJudges(t *testing.T) {
	bad := map[string]string{
		"seq as id":           `{"id":"42","type":"server.connected","properties":{}}`,
		"idle with outcome":   `{"id":"evt_1","type":"session.idle","properties":{"sessionID":"ses_1","runID":"run_1","outcome":"succeeded"}}`,
		"created without id":  `{"id":"evt_1","type":"session.created","properties":{"info":{"id":"ses_1","slug":"s","projectID":"p","directory":"/","title":"t","version":"v","time":{"created":1,"updated":1}}}}`,
		"busy with run id":    `{"id":"evt_1","type":"session.status","properties":{"sessionID":"ses_1","status":{"type":"busy","runID":"run_1"}}}`,
		"idle part":           `{"id":"evt_1","type":"message.part.updated","properties":{"sessionID":"ses_1","time":1,"part":{"id":"prt_1","sessionID":"ses_1","messageID":"msg_1","type":"idle","runID":"run_1"}}}`,
		"part update no time": `{"id":"evt_1","type":"message.part.updated","properties":{"sessionID":"ses_1","part":{"id":"prt_1","sessionID":"ses_1","messageID":"msg_1","type":"step-start"}}}`,
		"unknown type":        `{"id":"evt_1","type":"session.mystery","properties":{}}`,
	}
	for name, ev := range bad {
		if _, err := checkEvent([]byte(ev)); err == nil {
			t.Errorf("%s: accepted %s", name, ev)
		}
	}
	good := `{"id":"evt_1","type":"session.idle","properties":{"sessionID":"ses_1"}}`
	if _, err := checkEvent([]byte(good)); err != nil {
		t.Errorf("refused a valid session.idle: %v", err)
	}
	s, err := doc.responseSchema("/session/{sessionID}/message", "GET", 200)
	if err != nil || s == nil {
		t.Fatalf("message list schema: %v", err)
	}
	withRunID := `[{"info":{"id":"msg_1","sessionID":"ses_1","role":"user","time":{"created":1},"agent":"build","model":{"providerID":"p","modelID":"m"},"runID":"run_1"},"parts":[]}]`
	if validate(s, []byte(withRunID)) == nil {
		t.Error("accepted a message with runID")
	}
}

// TestRouteTable checks that the API reference's route table (docs/api.md)
// names every route of opencode's document, served or not.
func TestRouteTable(t *testing.T) {
	readme, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	for p, item := range doc.paths {
		for m := range item {
			op := "`" + strings.ToUpper(m) + " " + p + "`"
			if !strings.Contains(string(readme), op) {
				t.Errorf("README's route table does not mention %s", op)
			}
		}
	}
}

// succeeds reports whether an operation of agentd's document can answer
// 2xx: a refusal (a route that always answers an error opencode's
// document does not describe, such as 501) has nothing to judge.
func succeeds(responses map[string]json.RawMessage) bool {
	for code := range responses {
		if strings.HasPrefix(code, "2") {
			return true
		}
	}
	return false
}
