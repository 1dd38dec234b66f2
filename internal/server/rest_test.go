package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/server"
)

// sseFrame is one frame of an event stream: its id line (empty for
// live-only events) and its event.
type sseFrame struct {
	id string
	ev core.Event
}

// openStream follows GET path and sends its frames on the channel until
// the test ends.
func openStream(t *testing.T, url string) <-chan sseFrame {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	out := make(chan sseFrame, 64)
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var id string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				var ev core.Event
				if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev) == nil {
					select {
					case out <- sseFrame{id: id, ev: ev}:
					case <-ctx.Done():
						return
					}
				}
				id = ""
			}
		}
	}()
	return out
}

// nextOfType waits for the stream's next frame of an event type.
func nextOfType(t *testing.T, frames <-chan sseFrame, typ string) sseFrame {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case f := <-frames:
			if f.ev.Type == typ {
				return f
			}
		case <-timeout:
			t.Fatalf("no %s event", typ)
		}
	}
}

// TestTUIRequests: a request made of the TUIs is published as a live-only
// event (no id: a reconnecting TUI must not act on it twice) and queued
// for pollers, which get the requests in order, each once; a poller
// waiting with ?timeout= gets 204 when none comes, and one waiting
// without gets the next request made.
func TestTUIRequests(t *testing.T) {
	t.Parallel()
	a := start(t, server.Security{LoopbackOnly: true})
	base := a.URL()
	frames := openStream(t, base+"/event")
	nextOfType(t, frames, core.EventServerConnected)

	if r := call(t, "POST", base+"/tui/show-toast", `{"message":"hi","variant":"warning"}`, nil); r.status != 200 || string(bytes.TrimSpace(r.body)) != "true" {
		t.Fatalf("show-toast: %d %s", r.status, r.body)
	}
	f := nextOfType(t, frames, "tui.toast.show")
	if f.id != "" || !strings.Contains(string(f.ev.Properties), `"variant":"warning"`) {
		t.Errorf("toast event: id %q, properties %s", f.id, f.ev.Properties)
	}
	call(t, "POST", base+"/tui/execute-command", `{"command":"messages_first"}`, nil)
	if f := nextOfType(t, frames, "tui.command.execute"); string(f.ev.Properties) != `{"command":"session.first"}` {
		t.Errorf("a legacy command name was not translated: %s", f.ev.Properties)
	}

	for _, want := range []string{"/tui/show-toast", "/tui/execute-command"} {
		r := call(t, "GET", base+"/tui/control/next?timeout=5s", "", nil)
		var got struct {
			Path string          `json:"path"`
			Body json.RawMessage `json:"body"`
		}
		if json.Unmarshal(r.body, &got); r.status != 200 || got.Path != want {
			t.Fatalf("control/next: %d %s, want %s", r.status, r.body, want)
		}
	}
	if r := call(t, "GET", base+"/tui/control/next?timeout=50ms", "", nil); r.status != http.StatusNoContent {
		t.Errorf("control/next on an empty queue: %d %s, want 204", r.status, r.body)
	}
	got := make(chan resp, 1)
	go func() { got <- call(t, "GET", base+"/tui/control/next", "", nil) }()
	// The poller may not wait yet: the request is queued for it anyway.
	call(t, "POST", base+"/tui/append-prompt", `{"text":"later"}`, nil)
	if r := <-got; r.status != 200 || !strings.Contains(string(r.body), `"text":"later"`) {
		t.Errorf("waiting poller: %d %s", r.status, r.body)
	}
	for _, bad := range []struct{ path, body string }{
		{"/tui/show-toast", `{"variant":"info"}`},
		{"/tui/append-prompt", `{}`},
		{"/tui/select-session", `{"sessionID":"msg_x"}`},
		{"/tui/publish", `{"type":"tui.toast.show","properties":{"message":"m","variant":"loud"}}`},
	} {
		if r := call(t, "POST", base+bad.path, bad.body, nil); r.status != 400 {
			t.Errorf("POST %s %s: %d, want 400", bad.path, bad.body, r.status)
		}
	}
}

// lockedBuffer collects a logger's output.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestClientLog: a client's line reaches the server's log, marked as the
// client's and cut to size.
func TestClientLog(t *testing.T) {
	t.Parallel()
	var out lockedBuffer
	a, err := app.Start(t.Context(), app.Config{DBPath: filepath.Join(t.TempDir(), "a.db"), Host: "127.0.0.1", Version: "test",
		Directory: t.TempDir(), Security: server.Security{LoopbackOnly: true},
		Logger: slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Stop(t.Context()) })
	long := strings.Repeat("x", 20000)
	body, _ := json.Marshal(map[string]any{"service": "editor", "level": "error", "message": "start-" + long, "extra": map[string]string{"k": "v"}})
	if r := call(t, "POST", a.URL()+"/log", string(body), nil); r.status != 200 {
		t.Fatalf("log: %d %s", r.status, r.body)
	}
	logged := out.String()
	i := strings.Index(logged, "start-")
	if i < 0 || !strings.Contains(logged, "component=client") || !strings.Contains(logged, "service=editor") || !strings.Contains(logged, "level=ERROR") {
		t.Fatalf("the line was not logged as the client's: %.300s", logged)
	}
	if line := logged[i:]; strings.Contains(line, long) || !strings.Contains(line, "bytes cut") {
		t.Errorf("a 20 kB message was not cut")
	}
	if r := call(t, "POST", a.URL()+"/log", `{"service":"s","level":"fatal","message":"m"}`, nil); r.status != 400 {
		t.Errorf("unknown level: %d", r.status)
	}
}

// TestConfigPatch: the configuration is the operator's; a patch that
// changes nothing is answered with it, any other is refused and names the
// keys it would change.
func TestConfigPatch(t *testing.T) {
	t.Parallel()
	a := start(t, server.Security{LoopbackOnly: true})
	var cfg map[string]any
	json.Unmarshal(call(t, "GET", a.URL()+"/config", "", nil).body, &cfg)
	same, _ := json.Marshal(cfg)
	for _, path := range []string{"/config", "/global/config"} {
		if r := call(t, "PATCH", a.URL()+path, string(same), nil); r.status != 200 {
			t.Errorf("PATCH %s with the configuration as it is: %d %s", path, r.status, r.body)
		}
		r := call(t, "PATCH", a.URL()+path, `{"permission":{"bash":"allow"},"theme":"x"}`, nil)
		if name, msg := errorName(t, r.body); r.status != 403 || name != "ConfigReadOnlyError" || !strings.Contains(msg, "permission, theme") {
			t.Errorf("PATCH %s changing keys: %d %s %q", path, r.status, name, msg)
		}
	}
}

// TestMessageEditRefusals: the parts that record a run's steps cannot be
// deleted alone, a part cannot change type, and the path names the part.
func TestMessageEditRefusals(t *testing.T) {
	t.Parallel()
	a := start(t, server.Security{LoopbackOnly: true})
	sid := newSession(t, a)
	if r := call(t, "POST", a.URL()+"/session/"+sid+"/message", `{"parts":[{"type":"text","text":"reply:hi"}]}`, nil); r.status != 200 {
		t.Fatalf("prompt: %d %s", r.status, r.body)
	}
	var msgs []core.MessageWithParts
	json.Unmarshal(call(t, "GET", a.URL()+"/session/"+sid+"/message", "", nil).body, &msgs)
	user, answer := msgs[0], msgs[len(msgs)-1]
	for _, p := range answer.Parts {
		if p.Type == core.PartText {
			continue
		}
		r := call(t, "DELETE", a.URL()+"/session/"+sid+"/message/"+answer.Info.ID+"/part/"+p.ID, "", nil)
		if r.status != 400 {
			t.Errorf("delete of a %s part: %d %s", p.Type, r.status, r.body)
		}
	}
	up := a.URL() + "/session/" + sid + "/message/" + user.Info.ID + "/part/" + user.Parts[0].ID
	for _, body := range []string{`{"type":"reasoning","text":"x"}`, `{"id":"prt_other","type":"text","text":"x"}`, `{"type":"text","text":`} {
		if r := call(t, "PATCH", up, body, nil); r.status != 400 {
			t.Errorf("PATCH %s: %d %s", body, r.status, r.body)
		}
	}
	if r := call(t, "DELETE", a.URL()+"/session/ses_nope/message/"+user.Info.ID, "", nil); r.status != 404 {
		t.Errorf("delete in an unknown session: %d", r.status)
	}
}

// TestToolLists: the tools the node offers agents, the engine's own (task)
// included, with their input schemas.
func TestToolLists(t *testing.T) {
	t.Parallel()
	a := start(t, server.Security{LoopbackOnly: true})
	var ids []string
	json.Unmarshal(call(t, "GET", a.URL()+"/experimental/tool/ids", "", nil).body, &ids)
	for _, want := range []string{"bash", "read", "task"} {
		if !slices.Contains(ids, want) {
			t.Errorf("tool ids %v lack %s", ids, want)
		}
	}
	var list []struct {
		ID          string         `json:"id"`
		Description string         `json:"description"`
		Parameters  map[string]any `json:"parameters"`
	}
	json.Unmarshal(call(t, "GET", a.URL()+"/experimental/tool?provider=x&model=y", "", nil).body, &list)
	if len(list) != len(ids) {
		t.Fatalf("%d tools listed, %d ids", len(list), len(ids))
	}
	for _, tl := range list {
		if tl.Description == "" || tl.Parameters["type"] != "object" {
			t.Errorf("tool %s: description %q, parameters %v", tl.ID, tl.Description, tl.Parameters)
		}
	}
}
