package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/server"
	"github.com/agentd/agentd/internal/store"
)

// TestMain checks for leaked goroutines. net/http lingers up to 500 ms on a
// connection it closes after an oversized body; that goroutine is bounded.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("net/http.(*conn).closeWriteAndWait"))
}

func start(t *testing.T, sec server.Security) *app.App {
	t.Helper()
	a, err := app.Start(t.Context(), app.Config{
		DBPath: filepath.Join(t.TempDir(), "a.db"), Host: "127.0.0.1", Version: "test",
		Directory: "/work/default", Security: sec, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Stop(t.Context()) })
	return a
}

type resp struct {
	status int
	body   []byte
	header http.Header
}

func call(t *testing.T, method, url string, body string, hdr map[string]string) resp {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return resp{r.StatusCode, b, r.Header}
}

func errorName(t *testing.T, b []byte) (string, string) {
	t.Helper()
	var e struct {
		Name string `json:"name"`
		Data struct {
			Message string `json:"message"`
		} `json:"data"`
		// opencode's document gives some errors this shape.
		Tag     string `json:"_tag"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("error body is not JSON: %s", b)
	}
	if e.Tag != "" {
		return e.Tag, e.Message
	}
	return e.Name, e.Data.Message
}

func newSession(t *testing.T, a *app.App) string {
	t.Helper()
	r := call(t, "POST", a.URL()+"/session", "", nil)
	if r.status != 200 {
		t.Fatalf("create session: %d %s", r.status, r.body)
	}
	var s struct{ ID string }
	json.Unmarshal(r.body, &s)
	return s.ID
}

// TestBadInput: every bad request gets a JSON error with a fitting status
// and writes nothing.
func TestBadInput(t *testing.T) {
	t.Parallel()
	a := start(t, server.Security{LoopbackOnly: true})
	sid := newSession(t, a)
	u := a.URL()
	big := `{"title":"` + strings.Repeat("x", 11<<20) + `"}`
	rootLink := filepath.Join(t.TempDir(), "root")
	if err := os.Symlink("/", rootLink); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, method, path, body string
		hdr                      map[string]string
		status                   int
		errName, msgHas          string
	}{
		{"malformed json", "POST", "/session", `{"title":`, nil, 400, "BadRequest", "malformed JSON"},
		{"wrong type", "POST", "/session", `{"title":5}`, nil, 400, "BadRequest", "field title"},
		{"trailing data", "POST", "/session", `{} {}`, nil, 400, "BadRequest", "trailing"},
		{"relative directory", "POST", "/session?directory=rel/dir", ``, nil, 400, "BadRequest", "absolute"},
		{"missing directory", "POST", "/session?directory=/nonexistent/agentd-test", ``, nil, 400, "BadRequest", "does not exist"},
		{"file as directory", "POST", "/session?directory=/etc/hostname", ``, nil, 400, "BadRequest", "not a directory"},
		{"root as directory", "POST", "/session?directory=/", ``, nil, 400, "BadRequest", "cannot be a workspace"},
		{"symlink to root", "POST", "/session?directory=" + rootLink, ``, nil, 400, "BadRequest", "cannot be a workspace"},
		{"proc", "POST", "/session?directory=/proc/self", ``, nil, 400, "BadRequest", "cannot be a workspace"},
		{"sys", "POST", "/session", ``, map[string]string{"x-opencode-directory": "/sys/kernel"}, 400, "BadRequest", "cannot be a workspace"},
		{"unknown parent", "POST", "/session", `{"parentID":"ses_nope"}`, nil, 400, "BadRequest", "parentID"},
		{"too large", "POST", "/session", big, nil, 413, "PayloadTooLargeError", ""},
		{"empty title", "PATCH", "/session/" + sid, `{"title":"  "}`, nil, 400, "BadRequest", "title"},
		{"patch unknown", "PATCH", "/session/ses_nope", `{"title":"x"}`, nil, 404, "NotFoundError", ""},
		{"get unknown", "GET", "/session/ses_nope", ``, nil, 404, "NotFoundError", ""},
		{"delete unknown", "DELETE", "/session/ses_nope", ``, nil, 404, "NotFoundError", ""},
		{"status unknown", "GET", "/session/ses_nope/status", ``, nil, 404, "NotFoundError", ""},
		{"messages unknown", "GET", "/session/ses_nope/message", ``, nil, 404, "NotFoundError", ""},
		{"message unknown", "GET", "/session/" + sid + "/message/msg_nope", ``, nil, 404, "NotFoundError", ""},
		{"bad limit", "GET", "/session?limit=abc", ``, nil, 400, "BadRequest", "limit"},
		{"prompt unknown session", "POST", "/session/ses_nope/message", `{"parts":[{"type":"text","text":"hi"}]}`, nil, 404, "NotFoundError", ""},
		{"prompt no parts", "POST", "/session/" + sid + "/message", `{"parts":[]}`, nil, 400, "BadRequest", "parts"},
		{"prompt no body", "POST", "/session/" + sid + "/prompt_async", ``, nil, 400, "BadRequest", "required"},
		{"prompt parts wrong type", "POST", "/session/" + sid + "/prompt_async", `{"parts":"hi"}`, nil, 400, "BadRequest", "field parts"},
		{"prompt bad part type", "POST", "/session/" + sid + "/prompt_async", `{"parts":[{"type":"video"}]}`, nil, 400, "BadRequest", "parts[0].type"},
		{"prompt bad policy", "POST", "/session/" + sid + "/prompt_async", `{"parts":[{"type":"text","text":"x"}],"busy":"maybe"}`, nil, 400, "BadRequest", "busy policy"},
		{"prompt bad message id", "POST", "/session/" + sid + "/prompt_async", `{"messageID":"nope","parts":[{"type":"text","text":"x"}]}`, nil, 400, "BadRequest", "messageID"},
		{"prompt unknown model", "POST", "/session/" + sid + "/prompt_async", `{"model":{"providerID":"x","modelID":"y"},"parts":[{"type":"text","text":"x"}]}`, nil, 400, "BadRequest", "model"},
		{"abort unknown", "POST", "/session/ses_nope/abort", ``, nil, 404, "NotFoundError", ""},
		{"wait bad timeout", "POST", "/session/" + sid + "/wait?timeout=soon", ``, nil, 400, "BadRequest", "timeout"},
		{"run unknown", "GET", "/session/" + sid + "/run/run_nope", ``, nil, 404, "NotFoundError", ""},
		{"events bad cursor", "GET", "/event?after=-3", ``, nil, 400, "BadRequest", "after"},
		{"events bad last-event-id", "GET", "/event", ``, map[string]string{"Last-Event-ID": "abc"}, 400, "BadRequest", "Last-Event-ID"},
		{"session events unknown", "GET", "/session/ses_nope/event", ``, nil, 404, "NotFoundError", ""},
		{"wrong method", "DELETE", "/global/health", ``, nil, 405, "MethodNotAllowedError", ""},
		{"wrong method 2", "PUT", "/session", `{}`, nil, 405, "MethodNotAllowedError", ""},
		{"no route", "GET", "/nope", ``, nil, 404, "NotFoundError", ""},
		{"reply unknown permission", "POST", "/permission/per_nope/reply", `{"reply":"once"}`, nil, 404, "PermissionNotFoundError", "per_nope"},
		{"reply bad value", "POST", "/permission/per_nope/reply", `{"reply":"maybe"}`, nil, 400, "BadRequest", "reply"},
		{"session bad rule", "POST", "/session", `{"permission":[{"permission":"bash","pattern":"*","action":"perhaps"}]}`, nil, 400, "BadRequest", "action"},
	}
	_, before, _ := a.Store.EventBounds(t.Context())
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := call(t, c.method, u+c.path, c.body, c.hdr)
			if r.status != c.status {
				t.Fatalf("status = %d, want %d (%s)", r.status, c.status, r.body)
			}
			name, msg := errorName(t, r.body)
			if name != c.errName || !strings.Contains(msg, c.msgHas) {
				t.Errorf("error = %s %q, want %s containing %q", name, msg, c.errName, c.msgHas)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("content type = %q", ct)
			}
			if c.status == 405 && r.header.Get("Allow") == "" {
				t.Error("405 without Allow")
			}
		})
	}
	if _, after, _ := a.Store.EventBounds(t.Context()); after != before {
		t.Errorf("bad requests wrote %d events", after-before)
	}
	sessions, _ := a.Store.Sessions(t.Context(), store.SessionQuery{})
	if len(sessions) != 1 {
		t.Errorf("sessions = %d, want 1", len(sessions))
	}
}

func TestSessionRoutes(t *testing.T) {
	t.Parallel()
	a := start(t, server.Security{LoopbackOnly: true})
	u := a.URL()
	ws := t.TempDir()
	r := call(t, "POST", u+"/session", `{"title":"one"}`, map[string]string{"x-opencode-directory": ws})
	var s map[string]any
	json.Unmarshal(r.body, &s)
	if s["title"] != "one" || s["directory"] != ws {
		t.Fatalf("created = %s", r.body)
	}
	id := s["id"].(string)
	two := newSession(t, a)
	r = call(t, "GET", u+"/session?limit=1", "", nil)
	var list []map[string]any
	json.Unmarshal(r.body, &list)
	if len(list) != 1 || list[0]["id"] != two {
		t.Errorf("limit=1 list = %s", r.body)
	}
	r = call(t, "GET", u+"/session?directory="+ws, "", nil)
	json.Unmarshal(r.body, &list)
	if len(list) != 1 || list[0]["id"] != id {
		t.Errorf("directory filter = %s", r.body)
	}
	r = call(t, "PATCH", u+"/session/"+id, `{"title":"renamed"}`, nil)
	json.Unmarshal(r.body, &s)
	if s["title"] != "renamed" {
		t.Errorf("patched = %s", r.body)
	}
	r = call(t, "GET", u+"/session/status", "", nil)
	if strings.TrimSpace(string(r.body)) != "{}" {
		t.Errorf("status list = %s, want {}", r.body)
	}
	r = call(t, "GET", u+"/session/"+id+"/status", "", nil)
	if strings.TrimSpace(string(r.body)) != `{"type":"idle"}` {
		t.Errorf("status = %s", r.body)
	}
	r = call(t, "GET", u+"/session/"+id+"/message", "", nil)
	if strings.TrimSpace(string(r.body)) != "[]" {
		t.Errorf("messages = %s", r.body)
	}
	r = call(t, "GET", u+"/session/"+id+"/run", "", nil)
	if strings.TrimSpace(string(r.body)) != "[]" {
		t.Errorf("runs = %s", r.body)
	}
	r = call(t, "DELETE", u+"/session/"+id, "", nil)
	if strings.TrimSpace(string(r.body)) != "true" {
		t.Errorf("delete = %d %s", r.status, r.body)
	}
	if r = call(t, "GET", u+"/session/"+id, "", nil); r.status != 404 {
		t.Errorf("deleted session: %d", r.status)
	}
	r = call(t, "GET", u+"/global/health", "", nil)
	if !bytes.Contains(r.body, []byte(`"healthy":true`)) {
		t.Errorf("health = %s", r.body)
	}
}

// TestOpenAPIMatchesRoutes keeps /doc and the mux in sync: every
// documented operation is served (not 404/405), and nothing undocumented
// answers.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	a := start(t, server.Security{LoopbackOnly: true})
	r := call(t, "GET", a.URL()+"/doc", "", nil)
	var doc struct {
		OpenAPI string                    `json:"openapi"`
		Paths   map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(r.body, &doc); err != nil || doc.OpenAPI != "3.1.0" {
		t.Fatalf("doc: %v %s", err, doc.OpenAPI)
	}
	var ops []string
	for p, item := range doc.Paths {
		if strings.HasPrefix(p, "/api/") {
			continue // opencode 2's routes: package apiv2 pins them
		}
		if strings.Contains(p, "{id}") && strings.Contains(p, "/session/") {
			t.Errorf("%s: the document names a session {sessionID}, as opencode's does", p)
		}
		for m := range item {
			// Listed as the mux names them.
			ops = append(ops, strings.ToUpper(m)+" "+strings.ReplaceAll(p, "{sessionID}", "{id}"))
		}
	}
	sort.Strings(ops)
	want := []string{
		"DELETE /auth/{providerID}", "DELETE /experimental/workspace/{id}", "DELETE /mcp/{name}/auth", "DELETE /session/{id}",
		"DELETE /session/{id}/message/{messageID}", "DELETE /session/{id}/message/{messageID}/part/{partID}",
		"DELETE /session/{id}/share", "GET /agent", "GET /command", "GET /config", "GET /config/providers", "GET /doc", "GET /event",
		"GET /experimental/capabilities", "GET /experimental/console", "GET /experimental/console/orgs", "GET /experimental/resource",
		"GET /experimental/session", "GET /experimental/tool", "GET /experimental/tool/ids", "GET /experimental/workspace",
		"GET /experimental/workspace/adapter", "GET /experimental/workspace/status", "GET /file", "GET /file/content",
		"GET /file/status", "GET /find", "GET /find/file", "GET /find/symbol", "GET /formatter", "GET /global/config",
		"GET /global/event", "GET /global/health", "GET /lsp", "GET /mcp", "GET /metrics", "GET /node", "GET /path", "GET /permission",
		"GET /project/current", "GET /project/{projectID}/directories", "GET /provider", "GET /provider/auth", "GET /question",
		"GET /session", "GET /session/active", "GET /session/status", "GET /session/{id}", "GET /session/{id}/children",
		"GET /session/{id}/diff", "GET /session/{id}/event", "GET /session/{id}/message", "GET /session/{id}/message/{messageID}",
		"GET /session/{id}/run", "GET /session/{id}/run/{runID}", "GET /session/{id}/status", "GET /session/{id}/todo",
		"GET /tui/control/next", "GET /vcs", "GET /vcs/diff", "GET /vcs/diff/raw", "GET /vcs/status", "PATCH /config",
		"PATCH /global/config", "PATCH /session/{id}", "PATCH /session/{id}/message/{messageID}/part/{partID}",
		"POST /experimental/console/switch", "POST /experimental/session/{id}/background", "POST /experimental/workspace",
		"POST /experimental/workspace/sync-list", "POST /experimental/workspace/warp", "POST /global/dispose", "POST /global/upgrade",
		"POST /instance/dispose", "POST /log", "POST /mcp", "POST /mcp/{name}/auth", "POST /mcp/{name}/auth/authenticate",
		"POST /mcp/{name}/auth/callback", "POST /mcp/{name}/connect", "POST /mcp/{name}/disconnect",
		"POST /permission/{requestID}/reply", "POST /provider/{providerID}/oauth/authorize",
		"POST /provider/{providerID}/oauth/callback", "POST /question/{requestID}/reject", "POST /question/{requestID}/reply",
		"POST /session", "POST /session/{id}/abort", "POST /session/{id}/command", "POST /session/{id}/fork",
		"POST /session/{id}/init", "POST /session/{id}/message", "POST /session/{id}/permissions/{permissionID}",
		"POST /session/{id}/prompt_async", "POST /session/{id}/revert", "POST /session/{id}/share", "POST /session/{id}/shell",
		"POST /session/{id}/summarize", "POST /session/{id}/unrevert", "POST /session/{id}/wait", "POST /sync/history",
		"POST /sync/replay", "POST /sync/start", "POST /sync/steal", "POST /tui/append-prompt", "POST /tui/clear-prompt",
		"POST /tui/control/response", "POST /tui/execute-command", "POST /tui/open-help", "POST /tui/open-models",
		"POST /tui/open-sessions", "POST /tui/open-themes", "POST /tui/publish", "POST /tui/select-session", "POST /tui/show-toast",
		"POST /tui/submit-prompt", "POST /vcs/apply", "PUT /auth/{providerID}",
	}
	// Projects, worktrees and skills (projects.go).
	want = append(want, "GET /skill", "GET /project", "PATCH /project/{projectID}", "POST /project/git/init",
		"POST /experimental/project/{projectID}/copy", "DELETE /experimental/project/{projectID}/copy",
		"POST /experimental/project/{projectID}/copy/refresh", "POST /experimental/project/{projectID}/copy/generate-name",
		"GET /experimental/worktree", "POST /experimental/worktree", "DELETE /experimental/worktree",
		"POST /experimental/worktree/reset", "POST /experimental/control-plane/move-session")
	// The terminal routes (pty.go).
	want = append(want, "GET /pty", "POST /pty", "GET /pty/shells", "GET /pty/{ptyID}", "PUT /pty/{ptyID}",
		"DELETE /pty/{ptyID}", "POST /pty/{ptyID}/connect-token", "GET /pty/{ptyID}/connect")
	// Start paused (pause.go).
	want = append(want, "POST /session/{id}/resume")
	// Schedules (schedules.go).
	want = append(want, "POST /schedule", "GET /schedule", "GET /schedule/{id}", "DELETE /schedule/{id}")
	// The webhooks' routes (package webhook).
	want = append(want, "POST /webhook", "GET /webhook", "GET /webhook/{id}", "DELETE /webhook/{id}", "GET /webhook/delivery",
		"GET /webhook/delivery/{id}", "POST /webhook/delivery/{id}/retry")
	// The API keys (keys.go).
	want = append(want, "GET /key", "POST /key", "PATCH /key/{id}", "DELETE /key/{id}")
	sort.Strings(want)

	if diff := cmp.Diff(want, ops); diff != "" {
		t.Errorf("documented operations (-want +got):\n%s", diff)
	}
	for _, op := range ops {
		method, path, _ := strings.Cut(op, " ")
		if method == "GET" && strings.HasSuffix(path, "event") {
			continue // streams; covered elsewhere
		}
		path = strings.NewReplacer("{id}", "ses_nope", "{messageID}", "msg_nope", "{runID}", "run_nope",
			"{requestID}", "per_nope", "{permissionID}", "per_nope", "{projectID}", "global").Replace(path)
		if path == "/tui/control/next" {
			path += "?timeout=10ms" // it waits for a TUI request otherwise
		}
		r := call(t, method, a.URL()+path, "{}", nil)
		if r.status == 405 {
			t.Errorf("%s: documented but answers 405", op)
		}
		if r.status == 404 {
			if _, msg := errorName(t, r.body); strings.HasPrefix(msg, "no route") {
				t.Errorf("%s: documented but not routed", op)
			}
		}
	}
}

func TestSecurity(t *testing.T) {
	t.Parallel()
	a := start(t, server.Security{LoopbackOnly: true})
	u := a.URL() + "/global/health"
	for _, c := range []struct {
		hdr    map[string]string
		status int
	}{
		{nil, 200},
		{map[string]string{"Host": "localhost:4096"}, 200},
		{map[string]string{"Host": "[::1]:4096"}, 200},
		{map[string]string{"Host": "evil.example:4096"}, 403},
		{map[string]string{"Host": "127.0.0.1.nip.io"}, 403},
		{map[string]string{"Origin": a.URL()}, 200},
		{map[string]string{"Origin": "http://localhost:3000"}, 403},
		{map[string]string{"Origin": "http://127.0.0.1:1"}, 403},
		{map[string]string{"Origin": "https://evil.example"}, 403},
		{map[string]string{"Origin": "null"}, 403},
	} {
		if r := call(t, "GET", u, "", c.hdr); r.status != c.status {
			t.Errorf("%v: status %d, want %d", c.hdr, r.status, c.status)
		}
	}
	// A configured origin is allowed.
	cors := start(t, server.Security{LoopbackOnly: true, Origins: []string{"http://localhost:3000"}})
	if r := call(t, "GET", cors.URL()+"/global/health", "", map[string]string{"Origin": "http://localhost:3000"}); r.status != 200 {
		t.Errorf("configured origin: %d", r.status)
	}
	// A page cannot post a simple request (text/plain, a form) to drive
	// the server.
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", ""} {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", a.URL()+"/session", strings.NewReader(`{"title":"x"}`))
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnsupportedMediaType {
			t.Errorf("POST with Content-Type %q: %d, want 415", ct, resp.StatusCode)
		}
	}
	// Paths are not cleaned by redirect.
	for _, p := range []string{"/session/../global/health", "/global//health", "/session/"} {
		r := call(t, "GET", a.URL()+p, "", nil)
		if name, _ := errorName(t, r.body); r.status != 404 || name != "NotFoundError" {
			t.Errorf("GET %s: %d %s", p, r.status, r.body)
		}
	}
	sid := newSession(t, a)
	if r := call(t, "POST", a.URL()+"/session/"+sid+"/wait?timeout=-5", "", nil); r.status != 400 {
		t.Errorf("negative timeout: %d", r.status)
	}
	b := start(t, server.Security{Password: "s3cret"})
	if r := call(t, "GET", b.URL()+"/global/health", "", nil); r.status != 401 {
		t.Errorf("no credentials: %d", r.status)
	}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", b.URL()+"/global/health", nil)
	req.SetBasicAuth("opencode", "s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("with credentials: %v %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	req.SetBasicAuth("opencode", "wrong")
	resp, _ = http.DefaultClient.Do(req)
	if resp.StatusCode != 401 {
		t.Errorf("wrong password: %d", resp.StatusCode)
	}
	resp.Body.Close()
	// Password mode checks origins too (no CSRF through cached
	// credentials).
	req.SetBasicAuth("opencode", "s3cret")
	req.Header.Set("Origin", "https://evil.example")
	if resp, _ := http.DefaultClient.Do(req); resp.StatusCode != 403 {
		t.Errorf("cross-origin with credentials: %d", resp.StatusCode)
	}
	req.Header.Del("Origin")
	// Failed logins slow down the next failures from the address without
	// waiting on the connection: past the free ones, a failure is answered
	// at once with a Retry-After, and those during its delay are refused;
	// the right password is never refused or delayed.
	guess := func() (int, string) {
		req.SetBasicAuth("opencode", "guess")
		resp, _ := http.DefaultClient.Do(req)
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	for range 4 { // the wrong password above was the first
		guess()
	}
	if code, ra := guess(); code != http.StatusUnauthorized || ra == "" {
		t.Errorf("the sixth failure in a row: %d, Retry-After %q", code, ra)
	}
	if code, ra := guess(); code != http.StatusTooManyRequests || ra == "" {
		t.Errorf("a failure during the delay: %d, Retry-After %q", code, ra)
	}
	for range 3 {
		req.SetBasicAuth("opencode", "s3cret")
		resp, _ = http.DefaultClient.Do(req)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("the right password after failed logins: %d", resp.StatusCode)
		}
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	a := start(t, server.Security{LoopbackOnly: true})
	r := call(t, "GET", a.URL()+"/metrics", "", nil)
	if r.status != 200 {
		t.Fatalf("GET /metrics: %d", r.status)
	}
	for _, name := range []string{"go_goroutines ", "process_open_fds ", "process_resident_memory_bytes "} {
		if !strings.Contains(string(r.body), "\n"+name) {
			t.Errorf("/metrics has no %s", name)
		}
	}
}

// TestDashboardFiles: the dashboard is served from the binary, behind the
// API's rules (auth, origin), with a policy that keeps it to its own
// files and origin.
func TestDashboardFiles(t *testing.T) {
	t.Parallel()
	a := start(t, server.Security{LoopbackOnly: true})
	for path, ctype := range map[string]string{"/ui": "text/html", "/ui/app.js": "javascript", "/ui/style.css": "text/css"} {
		r := call(t, "GET", a.URL()+path, "", nil)
		if r.status != 200 || !strings.Contains(r.header.Get("Content-Type"), ctype) {
			t.Errorf("GET %s: %d %s", path, r.status, r.header.Get("Content-Type"))
		}
		if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "connect-src 'self'") {
			t.Errorf("GET %s: CSP %q", path, csp)
		}
	}
	if r := call(t, "GET", a.URL()+"/ui", "", nil); !strings.Contains(string(r.body), `src="/ui/app.js"`) {
		t.Errorf("page does not load its script: %s", r.body)
	}
	if r := call(t, "GET", a.URL()+"/ui/missing.js", "", nil); r.status != 404 {
		t.Errorf("missing file: %d", r.status)
	}
	if r := call(t, "POST", a.URL()+"/ui", "{}", nil); r.status == 200 {
		t.Errorf("POST /ui: %d", r.status)
	}
	b := start(t, server.Security{Password: "s3cret"})
	if r := call(t, "GET", b.URL()+"/ui", "", nil); r.status != 401 || r.header.Get("WWW-Authenticate") == "" {
		t.Errorf("dashboard without credentials: %d (the browser must be asked)", r.status)
	}
	if r := call(t, "GET", a.URL()+"/ui", "", map[string]string{"Host": "evil.example"}); r.status != 403 {
		t.Errorf("dashboard under a foreign Host: %d", r.status)
	}
}

// TestStreamHeadHeader: every event stream says in X-Agentd-Seq where the
// log stood when it opened, so a client that saw no durable event yet can
// still resume without a gap.
func TestStreamHeadHeader(t *testing.T) {
	t.Parallel()
	a := start(t, server.Security{LoopbackOnly: true})
	newSession(t, a)
	_, last, err := a.Store.EventBounds(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for _, path := range []string{"/event", "/global/event"} {
		req, _ := http.NewRequestWithContext(ctx, "GET", a.URL()+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("X-Agentd-Seq"); got != strconv.FormatInt(last, 10) || last == 0 {
			t.Errorf("GET %s: X-Agentd-Seq %q, the log's head is %d", path, got, last)
		}
	}
}

// TestDirectoryHeaderDecoded: opencode's SDK percent-encodes the
// x-opencode-directory header; the session gets the decoded, resolved
// directory.
func TestDirectoryHeaderDecoded(t *testing.T) {
	t.Parallel()
	a := start(t, server.Security{LoopbackOnly: true})
	dir := filepath.Join(t.TempDir(), "my project")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(dir)
	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(dir, link)
	for _, hdr := range []string{url.PathEscape(dir), dir, link} {
		r := call(t, "POST", a.URL()+"/session", "{}", map[string]string{"x-opencode-directory": hdr})
		var s struct{ Directory string }
		json.Unmarshal(r.body, &s)
		if r.status != 200 || s.Directory != real {
			t.Errorf("header %q: %d %s", hdr, r.status, r.body)
		}
	}
}
