package apiv2_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/llm/scripted"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// node is one agentd for a test, spoken to through both APIs.
type node struct {
	t   testing.TB
	app *app.App
	cfg app.Config
	url string
}

type option func(*app.Config)

// startNode starts agentd on a fresh database with the offline scripted
// model; bash is allowed (as an operator allows it), questions on.
func startNode(t testing.TB, opts ...option) *node {
	t.Helper()
	models := llm.NewRegistry()
	models.Add(scripted.ProviderID, &scripted.Model{Second: 20 * time.Millisecond}, nil)
	cfg := app.Config{DBPath: filepath.Join(t.TempDir(), "agentd.db"), Host: "127.0.0.1", Version: "test",
		Directory: t.TempDir(), Models: models, Logger: slog.New(slog.DiscardHandler), Heartbeat: time.Hour}
	cfg.Security.LoopbackOnly = true
	cfg.Engine.Permission = []core.Rule{{Permission: "bash", Pattern: "*", Action: core.ActionAllow}}
	cfg.Engine.Resume = true
	cfg.Engine.Questions = true
	for _, o := range opts {
		o(&cfg)
	}
	return startWith(t, cfg)
}

func startWith(t testing.TB, cfg app.Config) *node {
	t.Helper()
	a, err := app.Start(t.Context(), cfg)
	if err != nil {
		t.Fatalf("start agentd: %v", err)
	}
	n := &node{t: t, app: a, cfg: cfg, url: a.URL()}
	t.Cleanup(n.stop)
	return n
}

func (n *node) stop() {
	http.DefaultClient.CloseIdleConnections()
	_ = n.app.Stop(context.Background())
}

// restart stops the node and starts another on the same database.
func (n *node) restart() *node {
	n.stop()
	return startWith(n.t, n.cfg)
}

// answer is an HTTP answer.
type answer struct {
	status int
	body   []byte
	header http.Header
}

func (a answer) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(a.body, v); err != nil {
		t.Fatalf("decode %s: %v", a.body, err)
	}
}

// do sends a request (body: a JSON value, or nil) and reads the answer.
func (n *node) do(method, path string, body any) answer {
	n.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			n.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(n.t.Context(), method, n.url+path, rd)
	if err != nil {
		n.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		n.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		n.t.Fatal(err)
	}
	return answer{status: resp.StatusCode, body: b, header: resp.Header}
}

// must is do, failing the test on an answer other than want.
func (n *node) must(want int, method, path string, body any) answer {
	n.t.Helper()
	a := n.do(method, path, body)
	if a.status != want {
		n.t.Fatalf("%s %s: %d %s (want %d)", method, path, a.status, a.body, want)
	}
	return a
}

// session creates a session through opencode 2's API.
func (n *node) session() string {
	n.t.Helper()
	var out struct {
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	n.must(200, "POST", "/api/session", map[string]any{}).decode(n.t, &out)
	return out.Data.ID
}

// prompt admits a prompt through opencode 2's API and returns its id.
func (n *node) prompt(sid, text string) string {
	n.t.Helper()
	var out struct {
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	n.must(200, "POST", "/api/session/"+sid+"/prompt", map[string]any{"prompt": map[string]any{"text": text}}).decode(n.t, &out)
	return out.Data.ID
}

func (n *node) wait(sid string) { n.t.Helper(); n.must(204, "POST", "/api/session/"+sid+"/wait", nil) }

// event is one v2 event as the streams and history send it.
type event struct {
	ID      string               `json:"id"`
	Type    string               `json:"type"`
	Durable *struct{ Seq int64 } `json:"durable"`
	Data    map[string]any       `json:"data"`
	// sseID is the frame's SSE id ("" when it had none).
	sseID string
}

// history reads a session's whole history.
func (n *node) history(sid string) []event {
	n.t.Helper()
	var all []event
	after := "0"
	for {
		var page struct {
			Data    []event `json:"data"`
			HasMore bool    `json:"hasMore"`
		}
		n.must(200, "GET", "/api/session/"+sid+"/history?after="+after, nil).decode(n.t, &page)
		all = append(all, page.Data...)
		if !page.HasMore {
			return all
		}
		last := page.Data[len(page.Data)-1]
		after = itoa(last.Durable.Seq)
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func count(evs []event, typ string) int {
	c := 0
	for _, e := range evs {
		if e.Type == typ {
			c++
		}
	}
	return c
}

// entries reads a session's whole transcript in opencode 2's shape,
// oldest first.
func (n *node) entries(sid string) []map[string]any {
	n.t.Helper()
	var page struct {
		Data []map[string]any `json:"data"`
	}
	n.must(200, "GET", "/api/session/"+sid+"/message?order=asc&limit=200", nil).decode(n.t, &page)
	return page.Data
}

func ofType(list []map[string]any, typ string) []map[string]any {
	var out []map[string]any
	for _, m := range list {
		if m["type"] == typ {
			out = append(out, m)
		}
	}
	return out
}

// sse reads an event stream until stop says so (or the test's deadline),
// and returns the events it read.
func (n *node) sse(path string, header http.Header, stop func([]event) bool) []event {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(n.t.Context(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", n.url+path, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		n.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		n.t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	var out []event
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	var id string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			var e event
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e); err != nil {
				n.t.Fatalf("event %s: %v", line, err)
			}
			e.sseID, id = id, ""
			out = append(out, e)
			if stop(out) {
				return out
			}
		}
	}
	n.t.Fatalf("stream %s ended after %d events: %v", path, len(out), sc.Err())
	return nil
}

// waitFor polls cond (a cheap read of the server's state) until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func writeFile(path, text string) error { return os.WriteFile(path, []byte(text), 0o644) }
