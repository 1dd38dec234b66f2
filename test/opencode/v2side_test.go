package opencode_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/fakellm"
)

// TestV2SideBySide asks opencode 1.18.33's own server and agentd the
// opencode 2 questions opencode answers offline (create a session, list
// them, list the running ones, an unknown session, a prompt admitted
// without running), on the same fake model, and holds both answers to the
// document and to each other's shape.
func TestV2SideBySide(t *testing.T) {
	fake := httptest.NewServer(fakellm.New(fakellm.Options{Second: 50 * time.Millisecond}).Handler())
	t.Cleanup(fake.Close)
	oc := startOpencode(t, fake.URL+"/v1")
	ag := startNode(t, "")
	servers := map[string]string{"opencode": oc, "agentd": ag.rec.URL()}

	type answer struct {
		status int
		body   map[string]any
	}
	ask := func(base, method, path string, body any) answer {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = strings.NewReader(string(b))
		}
		req, _ := http.NewRequestWithContext(t.Context(), method, base+path, rd)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		a := answer{status: resp.StatusCode}
		if len(raw) > 0 {
			if err := json.Unmarshal(raw, &a.body); err != nil {
				t.Fatalf("%s %s%s: %s", method, base, path, raw)
			}
		}
		// Judge opencode's own answers too: the document must describe
		// them, or the comparison means nothing.
		tmpl, _ := doc.route(method, path)
		if s, _ := doc.responseSchema(tmpl, method, resp.StatusCode); s != nil && len(raw) > 0 {
			if err := validate(s, raw); err != nil {
				t.Errorf("%s %s on %s: %v", method, path, base, err)
			}
		}
		return a
	}
	ids := map[string]string{}
	for name, base := range servers {
		if a := ask(base, "GET", "/api/session/active", nil); a.status != 200 || len(a.body["data"].(map[string]any)) != 0 {
			t.Errorf("%s: active before any session = %d %v", name, a.status, a.body)
		}
		a := ask(base, "POST", "/api/session", map[string]any{"model": map[string]string{"providerID": "fake", "id": "fake-model"}})
		if a.status != 200 {
			t.Fatalf("%s: create = %d %v", name, a.status, a.body)
		}
		ids[name] = a.body["data"].(map[string]any)["id"].(string)
	}
	// The same fields, but for those opencode derives from its projects.
	got := map[string][]string{}
	for name, base := range servers {
		a := ask(base, "GET", "/api/session/"+ids[name], nil)
		got[name] = keys(a.body["data"].(map[string]any), "subpath")
		list := ask(base, "GET", "/api/session", nil)
		found := false
		for _, s := range list.body["data"].([]any) {
			found = found || s.(map[string]any)["id"] == ids[name]
		}
		if !found {
			t.Errorf("%s: the new session is not in the list", name)
		}
		if a := ask(base, "GET", "/api/session/active", nil); len(a.body["data"].(map[string]any)) != 0 {
			t.Errorf("%s: a session that never ran is listed as running: %v", name, a.body)
		}
		a = ask(base, "GET", "/api/session/ses_doesnotexist", nil)
		if a.status != 404 || a.body["_tag"] != "SessionNotFoundError" || a.body["sessionID"] != "ses_doesnotexist" {
			t.Errorf("%s: unknown session = %d %v", name, a.status, a.body)
		}
		a = ask(base, "POST", "/api/session/"+ids[name]+"/prompt", map[string]any{"prompt": map[string]string{"text": "kept for later"}, "resume": false})
		if a.status != 200 || a.body["data"].(map[string]any)["delivery"] != "steer" {
			t.Errorf("%s: prompt without resume = %d %v", name, a.status, a.body)
		}
		got[name+" admitted"] = keys(a.body["data"].(map[string]any))
	}
	for _, what := range []string{"", " admitted"} {
		if fmt.Sprint(got["agentd"+what]) != fmt.Sprint(got["opencode"+what]) {
			t.Errorf("fields%s: agentd %v, opencode %v", what, got["agentd"+what], got["opencode"+what])
		}
	}
}

// keys lists an object's keys but the ones left out.
func keys(m map[string]any, except ...string) []string {
	var out []string
	for k := range m {
		if !contains(except, k) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// startOpencode serves opencode 1.18.33 offline, in a workspace of its
// own whose configuration names the fake provider, and returns its URL.
func startOpencode(t *testing.T, baseURL string) string {
	t.Helper()
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	os.MkdirAll(ws, 0o755)
	conf := fmt.Sprintf(`{"model":"fake/fake-model","provider":{"fake":{"npm":"@ai-sdk/openai-compatible","name":"Fake",
		"options":{"baseURL":%q,"apiKey":"k"},"models":{"fake-model":{"name":"Fake Model"}}}}}`, baseURL)
	if err := os.WriteFile(filepath.Join(ws, "opencode.json"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	// opencode takes 0 for its default port; a free one is named instead.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, opencodeBin, "serve", "--port", fmt.Sprint(port), "--hostname", "127.0.0.1")
	cmd.Env = opencodeEnv(dir)
	cmd.Dir = ws
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	url := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				url <- m[1]
			}
		}
		close(url)
	}()
	select {
	case u, ok := <-url:
		if !ok {
			t.Fatal("opencode serve exited before it listened")
		}
		return u
	case <-time.After(90 * time.Second):
		t.Fatal("opencode serve did not start")
	}
	return ""
}
