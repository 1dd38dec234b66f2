package opencode_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"
)

// pendingOperations are opencode operations other branches of issue 37
// are building at the same time as this test was written; each still
// answers "no route" here. The lead empties this list as they merge: the
// test fails for an operation that is served and still listed.
var pendingOperations = map[string]string{
	// Branch tui: the working tree's git status, diff and patches.
	"GET /vcs/status": "tui", "GET /vcs/diff": "tui", "GET /vcs/diff/raw": "tui", "POST /vcs/apply": "tui",

	// Branch pty: terminals.
	"GET /pty": "pty", "POST /pty": "pty", "GET /pty/shells": "pty", "GET /pty/{ptyID}": "pty", "PUT /pty/{ptyID}": "pty",
	"DELETE /pty/{ptyID}": "pty", "GET /pty/{ptyID}/connect": "pty", "POST /pty/{ptyID}/connect-token": "pty",

	// Branch skills: skills, worktrees, projects and their copies (/move).
	// move-session is /move's last step (after the project copy); it is
	// listed with /move, whose branch owns the copies it moves between.
	"GET /skill": "skills", "GET /project": "skills", "POST /project/git/init": "skills", "PATCH /project/{projectID}": "skills",
	"GET /experimental/worktree": "skills", "POST /experimental/worktree": "skills", "DELETE /experimental/worktree": "skills",
	"POST /experimental/worktree/reset": "skills", "POST /experimental/project/{projectID}/copy": "skills",
	"DELETE /experimental/project/{projectID}/copy": "skills", "POST /experimental/project/{projectID}/copy/refresh": "skills",
	"POST /experimental/project/{projectID}/copy/generate-name": "skills",
	"POST /experimental/control-plane/move-session":             "skills (/move)",

	// Branch apiv2: provider keys, and opencode 2's API.
	"PUT /auth/{providerID}": "apiv2", "DELETE /auth/{providerID}": "apiv2",
	"PATCH /api/credential/{credentialID}": "apiv2", "DELETE /api/credential/{credentialID}": "apiv2",
	"GET /api/event": "apiv2", "GET /api/fs/read/*": "apiv2", "GET /api/health": "apiv2",
	"GET /api/integration/attempt/{attemptID}": "apiv2", "DELETE /api/integration/attempt/{attemptID}": "apiv2",
	"POST /api/integration/attempt/{attemptID}/complete": "apiv2", "GET /api/integration/{integrationID}": "apiv2",
	"POST /api/integration/{integrationID}/connect/key": "apiv2", "POST /api/integration/{integrationID}/connect/oauth": "apiv2",
	"GET /api/permission/request": "apiv2", "GET /api/permission/saved": "apiv2", "DELETE /api/permission/saved/{id}": "apiv2",
	"GET /api/provider/{providerID}": "apiv2", "GET /api/pty": "apiv2", "POST /api/pty": "apiv2", "GET /api/pty/{ptyID}": "apiv2",
	"PUT /api/pty/{ptyID}": "apiv2", "DELETE /api/pty/{ptyID}": "apiv2", "GET /api/pty/{ptyID}/connect": "apiv2",
	"POST /api/pty/{ptyID}/connect-token": "apiv2", "GET /api/question/request": "apiv2", "GET /api/session": "apiv2",
	"POST /api/session": "apiv2", "GET /api/session/active": "apiv2", "GET /api/session/{sessionID}": "apiv2",
	"POST /api/session/{sessionID}/agent": "apiv2", "POST /api/session/{sessionID}/compact": "apiv2",
	"GET /api/session/{sessionID}/context": "apiv2", "GET /api/session/{sessionID}/event": "apiv2",
	"GET /api/session/{sessionID}/history": "apiv2", "POST /api/session/{sessionID}/interrupt": "apiv2",
	"GET /api/session/{sessionID}/message": "apiv2", "GET /api/session/{sessionID}/message/{messageID}": "apiv2",
	"POST /api/session/{sessionID}/model": "apiv2", "GET /api/session/{sessionID}/permission": "apiv2", "POST /api/session/{sessionID}/permission": "apiv2",
	"GET /api/session/{sessionID}/permission/{requestID}": "apiv2", "POST /api/session/{sessionID}/permission/{requestID}/reply": "apiv2",
	"POST /api/session/{sessionID}/prompt": "apiv2", "GET /api/session/{sessionID}/question": "apiv2",
	"POST /api/session/{sessionID}/question/{requestID}/reject": "apiv2", "POST /api/session/{sessionID}/question/{requestID}/reply": "apiv2",
	"POST /api/session/{sessionID}/revert/clear": "apiv2", "POST /api/session/{sessionID}/revert/commit": "apiv2",
	"POST /api/session/{sessionID}/revert/stage": "apiv2", "POST /api/session/{sessionID}/wait": "apiv2",
}

// pathValues fill the path parameters of the walk: ids of the right kind
// that name nothing.
var pathValues = strings.NewReplacer("{sessionID}", "ses_walk", "{messageID}", "msg_walk", "{partID}", "prt_walk",
	"{requestID}", "per_walk", "{permissionID}", "per_walk", "{projectID}", "global", "{providerID}", "walk",
	"{name}", "walk", "{ptyID}", "pty_walk", "{id}", "wrk_walk", "{integrationID}", "walk", "{credentialID}", "walk",
	"{attemptID}", "walk", "*", "walk.txt")

// TestEveryOperationRouted sends every operation of opencode's document a
// request (ids that name nothing, an empty object as body) and checks
// that agentd routes it: no 404 "no route", no 405. What it answers —
// served, not found, refused with a reason — the other tests judge.
func TestEveryOperationRouted(t *testing.T) {
	n := startNode(t, "")
	var ops []string
	for p, item := range doc.paths {
		for m := range item {
			switch m {
			case "get", "post", "put", "patch", "delete":
				ops = append(ops, strings.ToUpper(m)+" "+p)
			}
		}
	}
	sort.Strings(ops)
	routed := 0
	for _, op := range ops {
		method, tmpl, _ := strings.Cut(op, " ")
		path := pathValues.Replace(tmpl)
		if tmpl == "/tui/control/next" {
			path += "?timeout=10ms" // it waits for a TUI request otherwise
		}
		status, body := walk(t, n, method, path)
		owner, pending := pendingOperations[op]
		unrouted := status == http.StatusMethodNotAllowed || status == http.StatusNotFound && strings.Contains(body, "no route for")
		switch {
		case unrouted && !pending:
			t.Errorf("%s: %d %s", op, status, body)
		case !unrouted && pending:
			t.Errorf("%s is routed now (%d): take it off pendingOperations (branch %s)", op, status, owner)
		case !unrouted:
			routed++
		}
	}
	t.Logf("%d of %d operations routed; %d pending on other branches", routed, len(ops), len(pendingOperations))
	if unknown := unknownPending(); len(unknown) > 0 {
		t.Errorf("pendingOperations names operations opencode's document does not have: %v", unknown)
	}
}

// unknownPending lists pending operations the document does not have.
func unknownPending() []string {
	var out []string
	for op := range pendingOperations {
		method, p, _ := strings.Cut(op, " ")
		if _, ok := doc.paths[p][strings.ToLower(method)]; !ok {
			out = append(out, op)
		}
	}
	sort.Strings(out)
	return out
}

// walk makes one request through the recorder and returns its status and
// the start of its body; a stream is closed after its headers.
func walk(t *testing.T, n *node, method, path string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var body io.Reader
	if method != "GET" && method != "DELETE" {
		body = strings.NewReader("{}")
	}
	req, err := http.NewRequestWithContext(ctx, method, n.rec.URL()+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp.StatusCode, "(stream)"
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var e struct {
		Data struct {
			Message string `json:"message"`
		} `json:"data"`
	}
	if json.Unmarshal(b, &e) == nil && e.Data.Message != "" {
		return resp.StatusCode, e.Data.Message
	}
	return resp.StatusCode, string(b)
}
