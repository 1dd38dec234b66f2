package opencode_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// v2EventTypes are the event types the v2 scenario must make agentd send
// on opencode 2's streams.
var v2EventTypes = []string{
	"server.connected", "session.created", "message.updated", "message.part.updated", "session.status", "session.idle",
	"session.next.prompted", "session.next.step.started", "session.next.step.ended", "session.next.text.started",
	"session.next.text.ended", "session.next.reasoning.started", "session.next.reasoning.ended", "session.next.tool.called",
	"session.next.tool.success", "session.next.tool.failed", "session.next.retried", "session.next.step.failed",
	"session.next.compaction.started", "session.next.compaction.ended", "session.next.revert.staged",
	"session.next.revert.cleared", "session.next.revert.committed", "session.execution.started",
	"session.execution.succeeded", "session.execution.failed", "session.execution.interrupted",
	"permission.v2.asked", "permission.v2.replied", "question.v2.asked", "question.v2.replied", "question.v2.rejected",
	"pty.created", "pty.updated", "pty.exited", "pty.deleted",
}

// TestSchemaV2 drives every operation of opencode 2's API (the /api
// routes) through the recorder, with every kind of run, and judges each
// answer and event by opencode's document (1.18.33's, with the later
// schema's additions where agentd serves those: v2overlay_test.go).
func TestSchemaV2(t *testing.T) {
	n := startNode(t, `, "permission": {"bash": "ask"}, "agentd": {"questions": true, "terminal": {"enabled": true}}`)
	n.follow(t, "/api/event")
	n.follow(t, "/api/event?after=0")

	type data[T any] struct {
		Data T `json:"data"`
	}
	var s data[struct {
		ID string `json:"id"`
	}]
	if code := n.call(t, "POST", "/api/session", map[string]any{"agent": "build", "model": map[string]string{"providerID": "agentd", "id": "scripted"},
		"location": map[string]string{"directory": n.dir}}, &s); code != 200 {
		t.Fatalf("create session: %d", code)
	}
	sid := s.Data.ID
	sp := "/api/session/" + sid
	n.follow(t, sp+"/event?after=0")
	prompt := func(text string, extra map[string]any) string {
		t.Helper()
		body := map[string]any{"prompt": map[string]any{"text": text}}
		for k, v := range extra {
			body[k] = v
		}
		var out data[struct {
			ID string `json:"id"`
		}]
		if code := n.call(t, "POST", sp+"/prompt", body, &out); code != 200 {
			t.Fatalf("prompt %q: %d", text, code)
		}
		if code := n.call(t, "POST", sp+"/wait", nil, nil); code != 204 {
			t.Fatalf("wait: %d", code)
		}
		return out.Data.ID
	}
	first := prompt("reasoning:let me think\nreply:hello there", map[string]any{"id": "msg_v2schemaclient0001", "delivery": "steer"})
	prompt(`tool:read:{"filePath":"hello.txt"}`+"\n"+`tool:read:{"filePath":"missing.txt"}`+"\nreply:read", nil)
	prompt("fail:503x1\nreply:after a retry", map[string]any{"delivery": "queue"})
	prompt("fail:400", nil)
	prompt("a file", map[string]any{"prompt": map[string]any{"text": "reply:got it",
		"files": []map[string]string{{"uri": "data:text/plain;base64,bm90ZQ==", "name": "note.txt"}}, "agents": []map[string]string{{"name": "general"}}}})
	if code := n.call(t, "POST", sp+"/prompt", map[string]any{"prompt": map[string]any{"text": "kept"}, "resume": false}, nil); code != 200 {
		t.Errorf("prompt without resume: %d", code)
	}
	if code := n.call(t, "POST", sp+"/compact", nil, nil); code != 204 {
		t.Errorf("compact: %d", code)
	}
	n.call(t, "POST", sp+"/wait", nil, nil)
	n.call(t, "POST", sp+"/agent", map[string]string{"agent": "plan"}, nil)
	n.call(t, "POST", sp+"/agent", map[string]string{"agent": "build"}, nil)
	n.call(t, "POST", sp+"/model", map[string]any{"model": map[string]string{"providerID": "fake", "id": "fake-model"}}, nil)
	n.call(t, "POST", sp+"/model", map[string]any{"model": map[string]string{"providerID": "agentd", "id": "scripted"}}, nil)

	// An interrupted run.
	var busy data[map[string]any]
	n.call(t, "POST", sp+"/prompt", map[string]any{"prompt": map[string]any{"text": "sleep:30"}}, nil)
	waitUntil(t, "the session to run", func() bool {
		n.call(t, "GET", "/api/session/active", nil, &busy)
		return busy.Data[sid] != nil
	})
	n.call(t, "POST", sp+"/interrupt", nil, nil)
	n.call(t, "POST", sp+"/wait", nil, nil)

	// Permissions: asked, answered always (a saved approval), withdrawn.
	n.call(t, "POST", sp+"/prompt", map[string]any{"prompt": map[string]any{"text": `tool:bash:{"command":"echo hi"}`}}, nil)
	var perms data[[]struct {
		ID string `json:"id"`
	}]
	waitUntil(t, "a permission request", func() bool {
		n.call(t, "GET", sp+"/permission", nil, &perms)
		return len(perms.Data) > 0
	})
	n.call(t, "GET", "/api/permission/request", nil, nil)
	n.call(t, "GET", sp+"/permission/"+perms.Data[0].ID, nil, nil)
	n.call(t, "POST", sp+"/permission/"+perms.Data[0].ID+"/reply", map[string]string{"reply": "always"}, nil)
	n.call(t, "POST", sp+"/wait", nil, nil)
	var saved data[[]struct {
		ID string `json:"id"`
	}]
	n.call(t, "GET", "/api/permission/saved", nil, &saved)
	if len(saved.Data) == 0 {
		t.Fatal("no saved approval after an always answer")
	}
	n.call(t, "DELETE", "/api/permission/saved/"+saved.Data[0].ID, nil, nil)
	n.call(t, "POST", sp+"/permission", map[string]any{"action": "bash", "resources": []string{"rm -rf /"}}, nil)
	n.call(t, "GET", sp+"/permission/per_doesnotexist", nil, nil)

	// Questions: one answered, one dismissed.
	for _, how := range []string{"reply", "reject"} {
		n.call(t, "POST", sp+"/prompt", map[string]any{"prompt": map[string]any{"text": `tool:question:{"questions":[{"question":"Which?","header":"Pick","options":[{"label":"A","description":"the first"}]}]}` + "\nreply:ok"}}, nil)
		var qs data[[]struct {
			ID string `json:"id"`
		}]
		waitUntil(t, "a question", func() bool {
			n.call(t, "GET", sp+"/question", nil, &qs)
			return len(qs.Data) > 0
		})
		n.call(t, "GET", "/api/question/request", nil, nil)
		n.call(t, "POST", sp+"/question/"+qs.Data[0].ID+"/"+how, map[string]any{"answers": [][]string{{"A"}}}, nil)
		n.call(t, "POST", sp+"/wait", nil, nil)
	}

	// Revert: staged, cleared, staged again and committed.
	n.call(t, "POST", sp+"/revert/stage", map[string]string{"messageID": first}, nil)
	n.call(t, "POST", sp+"/revert/clear", nil, nil)
	n.call(t, "POST", sp+"/revert/stage", map[string]string{"messageID": first}, nil)
	n.call(t, "POST", sp+"/revert/commit", nil, nil)
	prompt("reply:after the revert", nil)

	// Reads.
	var page struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
		Cursor struct {
			Next string `json:"next"`
		} `json:"cursor"`
	}
	n.call(t, "GET", sp+"/message?limit=2", nil, &page)
	if page.Cursor.Next != "" {
		n.call(t, "GET", sp+"/message?limit=2&cursor="+page.Cursor.Next, nil, nil)
	}
	n.call(t, "GET", sp+"/message?order=asc", nil, &page)
	for _, m := range page.Data {
		n.call(t, "GET", sp+"/message/"+m.ID, nil, nil)
	}
	var sessions struct {
		Cursor struct {
			Next string `json:"next"`
		} `json:"cursor"`
	}
	n.call(t, "POST", "/api/session", map[string]any{}, nil)
	n.call(t, "GET", "/api/session?limit=1", nil, &sessions)
	n.call(t, "GET", "/api/session?limit=1&cursor="+sessions.Cursor.Next, nil, nil)
	for _, p := range []string{
		"/api/health", "/api/location", "/api/agent", "/api/session", "/api/session?order=asc&search=new", "/api/session/active", sp,
		sp + "/context", sp + "/history", sp + "/history?limit=3&after=2", "/api/model", "/api/provider", "/api/provider/fake",
		"/api/integration", "/api/integration/fake", "/api/permission/request", "/api/permission/saved", "/api/fs/read/hello.txt",
		"/api/fs/list?path=.", "/api/fs/find?query=hel", "/api/command", "/api/skill", "/api/question/request", "/api/reference",
		sp + "/permission", sp + "/question",
	} {
		if code := n.call(t, "GET", p, nil, nil); code != 200 {
			t.Errorf("GET %s: %d", p, code)
		}
	}
	// Integrations and credentials; OAuth is refused.
	if code := n.call(t, "POST", "/api/integration/fake/connect/key", map[string]string{"key": "sk-test", "label": "test"}, nil); code != 204 {
		t.Errorf("connect key: %d", code)
	}
	n.call(t, "PATCH", "/api/credential/fake", map[string]string{"label": "renamed"}, nil)
	n.call(t, "DELETE", "/api/credential/fake", nil, nil)
	n.call(t, "POST", "/api/integration/fake/connect/oauth", map[string]any{"methodID": "x", "inputs": map[string]string{}}, nil)
	n.call(t, "GET", "/api/integration/attempt/att_1", nil, nil)
	n.call(t, "DELETE", "/api/integration/attempt/att_1", nil, nil)
	n.call(t, "POST", "/api/integration/attempt/att_1/complete", map[string]string{"code": "x"}, nil)
	// Errors the document describes.
	for _, p := range []string{"/api/session/ses_doesnotexist", "/api/session/ses_doesnotexist/message", "/api/session/ses_doesnotexist/history",
		"/api/session/ses_doesnotexist/context", sp + "/message/msg_doesnotexist", "/api/provider/nope", "/api/session?cursor=bad"} {
		n.call(t, "GET", p, nil, nil)
	}
	for _, p := range []string{"/wait", "/interrupt", "/compact", "/revert/clear"} {
		if code := n.call(t, "POST", "/api/session/ses_doesnotexist"+p, nil, nil); code != http.StatusNotFound {
			t.Errorf("POST %s on an unknown session: %d, want 404", p, code)
		}
	}
	n.call(t, "POST", sp+"/prompt", map[string]any{"prompt": 5}, nil)
	schemaV2Terminals(t, n)
	n.rec.waitEvents(t, v2EventTypes) // the streams' last events

	v := n.rec.check(t)
	for _, typ := range v2EventTypes {
		if v.eventTypes[typ] == 0 {
			t.Errorf("no %s event was judged on opencode 2's streams; seen: %v", typ, sortedKeys(v.eventTypes))
		}
	}
	checkV2Operations(t, n, v)
}

// checkV2Operations checks that every operation of opencode 2's API that
// agentd lists was judged, and that it lists all of the document's.
func checkV2Operations(t *testing.T, n *node, v verdict) {
	t.Helper()
	var ours struct {
		Paths map[string]map[string]struct {
			Tags        []string `json:"tags"`
			OperationID string   `json:"operationId"`
		} `json:"paths"`
	}
	n.call(t, "GET", "/doc", nil, &ours)
	listed := 0
	for p, item := range ours.Paths {
		for m, op := range item {
			if !slices.Contains(op.Tags, "opencode v2") {
				continue
			}
			listed++
			if _, ok := doc.paths[p][m]; !ok {
				t.Errorf("%s %s is tagged opencode v2 but opencode's document has no such operation", strings.ToUpper(m), p)
				continue
			}
			if strings.HasSuffix(p, "/event") {
				continue // streams are judged by their events
			}
			if v.operations[strings.ToUpper(m)+" "+p] == 0 {
				t.Errorf("%s %s (%s) was never judged", strings.ToUpper(m), p, op.OperationID)
			}
		}
	}
	want := 0
	for p, item := range doc.paths {
		if strings.HasPrefix(p, "/api/") {
			want += len(item)
		}
	}
	if listed != want {
		t.Errorf("agentd lists %d of the %d /api operations of opencode's document", listed, want)
	}
}

// schemaV2Terminals drives opencode 2's terminal routes: one terminal that
// exits by itself, one removed while it runs, and the errors the document
// describes (an unknown terminal, a bad size, a ticket asked for without
// opencode's header, a spent ticket, a connect that is no websocket).
func schemaV2Terminals(t *testing.T, n *node) {
	t.Helper()
	type located struct {
		Data struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"data"`
	}
	var running, done located
	if code := n.call(t, "POST", "/api/pty", map[string]any{"command": "/bin/sh", "args": []string{"-c", "read x"}, "title": "schema"}, &running); code != 200 {
		t.Fatalf("create a terminal: %d", code)
	}
	n.call(t, "POST", "/api/pty", map[string]any{"command": "/bin/sh", "args": []string{"-c", "exit 0"}}, &done)
	waitUntil(t, "the terminal's exit", func() bool {
		var info located
		n.call(t, "GET", "/api/pty/"+done.Data.ID, nil, &info)
		return info.Data.Status == "exited"
	})
	p := "/api/pty/" + running.Data.ID
	for _, path := range []string{"/api/pty", p, "/api/pty/" + done.Data.ID} {
		if code := n.call(t, "GET", path, nil, nil); code != 200 {
			t.Errorf("GET %s: %d", path, code)
		}
	}
	n.call(t, "GET", "/api/pty/pty_doesnotexist", nil, nil)
	if code := n.call(t, "PUT", p, map[string]any{"title": "renamed", "size": map[string]int{"rows": 30, "cols": 100}}, nil); code != 200 {
		t.Errorf("PUT %s: %d", p, code)
	}
	n.call(t, "PUT", p, map[string]any{"size": map[string]int{"rows": 0, "cols": 100}}, nil)
	n.call(t, "POST", p+"/connect-token", nil, nil) // without opencode's header: 403
	req, _ := http.NewRequestWithContext(t.Context(), "POST", n.rec.URL()+p+"/connect-token", nil)
	req.Header.Set("x-opencode-ticket", "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("connect-token: %v %v", resp, err)
	}
	var tk struct {
		Data struct {
			Ticket string `json:"ticket"`
		} `json:"data"`
	}
	err = json.NewDecoder(resp.Body).Decode(&tk)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	n.call(t, "GET", p+"/connect", nil, nil) // not a websocket: 400
	n.call(t, "GET", p+"/connect?ticket="+tk.Data.Ticket, nil, nil)
	n.call(t, "GET", p+"/connect?ticket="+tk.Data.Ticket, nil, nil) // spent: 403
	n.call(t, "GET", "/api/pty/pty_doesnotexist/connect", nil, nil)
	for _, id := range []string{running.Data.ID, done.Data.ID} {
		if code := n.call(t, "DELETE", "/api/pty/"+id, nil, nil); code != 204 {
			t.Errorf("DELETE /api/pty/%s: %d", id, code)
		}
	}
	n.call(t, "DELETE", p, nil, nil)
}

// TestSchemaV2TerminalsOff: with terminals off (the default) every
// /api/pty route answers 403, in the shape the document gives where it
// describes one.
func TestSchemaV2TerminalsOff(t *testing.T) {
	n := startNode(t, "")
	for _, rt := range [][2]string{{"GET", "/api/pty"}, {"POST", "/api/pty"}, {"GET", "/api/pty/pty_x"}, {"PUT", "/api/pty/pty_x"},
		{"DELETE", "/api/pty/pty_x"}, {"POST", "/api/pty/pty_x/connect-token"}, {"GET", "/api/pty/pty_x/connect"},
		{"GET", "/api/pty/pty_x/connect?ticket=x"}} {
		var body any
		if rt[0] != "GET" && rt[0] != "DELETE" {
			body = map[string]any{}
		}
		if code := n.call(t, rt[0], rt[1], body, nil); code != http.StatusForbidden {
			t.Errorf("%s %s: %d, want 403", rt[0], rt[1], code)
		}
	}
	v := n.rec.check(t)
	for _, op := range []string{"POST /api/pty/{ptyID}/connect-token", "GET /api/pty/{ptyID}/connect"} {
		if v.operations[op] == 0 {
			t.Errorf("%s: its 403 was not judged", op)
		}
	}
}
