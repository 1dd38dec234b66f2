package server_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/server"
)

// syncBuffer is a log destination written by the server's goroutines and
// read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAccessLog: every request is one line (method, path, status,
// duration, bytes, client) at info, 404s and refused requests included;
// off when asked.
func TestAccessLog(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{true, false} {
		var logs syncBuffer
		a, err := app.Start(t.Context(), app.Config{
			DBPath: filepath.Join(t.TempDir(), "a.db"), Host: "127.0.0.1", Version: "test", Directory: t.TempDir(),
			Security: server.Security{LoopbackOnly: true}, Logger: slog.New(slog.NewJSONHandler(&logs, nil)), AccessLog: on,
		})
		if err != nil {
			t.Fatal(err)
		}
		call(t, "GET", a.URL()+"/session/ses_nope", "", nil)
		call(t, "GET", a.URL()+"/global/health?secret=x", "", nil)
		call(t, "GET", a.URL()+"/global/health", "", map[string]string{"Host": "evil.example"})
		a.Stop(t.Context())
		var lines []map[string]any
		for _, l := range strings.Split(logs.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["component"] == "access" {
				lines = append(lines, m)
			}
		}
		if !on {
			if len(lines) != 0 {
				t.Errorf("access log off, yet %d lines", len(lines))
			}
			continue
		}
		if len(lines) != 3 {
			t.Fatalf("%d access lines, want 3:\n%s", len(lines), logs.String())
		}
		for i, want := range []struct {
			path   string
			status float64
		}{{"/session/ses_nope", 404}, {"/global/health", 200}, {"/global/health", 403}} {
			l := lines[i]
			if l["level"] != "INFO" || l["method"] != "GET" || l["path"] != want.path || l["status"] != want.status ||
				l["bytes"].(float64) <= 0 || l["duration"] == nil || !strings.HasPrefix(l["client"].(string), "127.0.0.1:") {
				t.Errorf("line %d = %v, want GET %s %v", i, l, want.path, want.status)
			}
		}
		if strings.Contains(logs.String(), "secret=x") {
			t.Error("the query was logged")
		}
	}
}

// TestRootLeadsToTheDashboard: / and /ui/ redirect to the dashboard.
func TestRootLeadsToTheDashboard(t *testing.T) {
	t.Parallel()
	a := start(t, server.Security{LoopbackOnly: true})
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, p := range []string{"/", "/ui/"} {
		r, err := noFollow.Get(a.URL() + p)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode/100 != 3 || r.Header.Get("Location") != "/ui" {
			t.Errorf("GET %s = %d → %q, want a redirect to /ui", p, r.StatusCode, r.Header.Get("Location"))
		}
	}
	r := call(t, "GET", a.URL()+"/", "", nil) // followed
	if r.status != 200 || !strings.Contains(string(r.body), "<html") {
		t.Errorf("/ followed: %d %.100s", r.status, r.body)
	}
}
