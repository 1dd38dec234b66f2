package server_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/server"
)

// TestRequestIDAndRouteMetrics: every answer carries a request id (the
// client's when usable), which the access log line and an error body
// carry too; /metrics counts requests by route pattern, never by raw
// path, and says what build runs.
func TestRequestIDAndRouteMetrics(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	a, err := app.Start(t.Context(), app.Config{
		DBPath: filepath.Join(t.TempDir(), "a.db"), Host: "127.0.0.1", Version: "test", Directory: t.TempDir(),
		Security: server.Security{LoopbackOnly: true}, Logger: slog.New(slog.NewJSONHandler(&logs, nil)), AccessLog: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop(t.Context())
	get := func(path, id string) (*http.Response, string) {
		req, _ := http.NewRequest("GET", a.URL()+path, nil)
		if id != "" {
			req.Header.Set("X-Request-Id", id)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := get("/session/ses_nope", "req-42.a:b")
	var e struct {
		Data map[string]any `json:"data"`
	}
	if resp.Header.Get("X-Request-Id") != "req-42.a:b" || json.Unmarshal([]byte(body), &e) != nil || e.Data["httpRequestID"] != "req-42.a:b" {
		t.Errorf("the client's id: %s %s", resp.Header.Get("X-Request-Id"), body)
	}
	hex16 := regexp.MustCompile(`^[0-9a-f]{16}$`)
	for _, id := range []string{"", "two words", strings.Repeat("x", 200)} {
		if resp, _ := get("/global/health", id); !hex16.MatchString(resp.Header.Get("X-Request-Id")) {
			t.Errorf("X-Request-Id for a request sent %q = %q, want a new one", id, resp.Header.Get("X-Request-Id"))
		}
	}
	if !strings.Contains(logs.String(), `"path":"/session/ses_nope","status":404`) || !strings.Contains(logs.String(), `"request_id":"req-42.a:b"`) {
		t.Errorf("the access log has no request id:\n%s", logs.String())
	}
	_, metrics := get("/metrics", "")
	for _, want := range []string{
		`agentd_build_info{goversion="` + runtime.Version() + `",revision="`,
		`agentd_http_requests_total{code="4xx",method="GET",route="/session/{id}"} 1`,
		`agentd_http_requests_total{code="2xx",method="GET",route="/global/health"} 3`,
		`agentd_http_request_duration_seconds_count{method="GET",route="/global/health"} 3`,
		`agentd_http_requests_total{code="2xx",method="POST",route="/session"} 0`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(metrics, "ses_nope") {
		t.Error("a raw path is a metric label")
	}
}
