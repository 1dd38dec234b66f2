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
		if status == http.StatusMethodNotAllowed || status == http.StatusNotFound && strings.Contains(body, "no route for") {
			t.Errorf("%s: %d %s", op, status, body)
			continue
		}
		routed++
	}
	t.Logf("%d of %d operations routed", routed, len(ops))
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
