package opencode_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
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
}

// TestSchemaV2 drives every operation of opencode 2's API (the /api
// routes) through the recorder, with every kind of run, and judges each
// answer and event by opencode's document (1.18.33's, with the later
// schema's additions where agentd serves those: v2overlay_test.go).
func TestSchemaV2(t *testing.T) {
	n := startNode(t, `, "permission": {"bash": "ask"}, "agentd": {"questions": true}`)
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
	for _, m := range []string{"GET", "POST"} {
		n.call(t, m, "/api/pty", nil, nil)
	}
	time.Sleep(300 * time.Millisecond) // the streams' last events

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
			if strings.HasPrefix(p, "/api/pty") || strings.HasSuffix(p, "/event") {
				continue // refused until the terminals are wired; streams are judged by their events
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
