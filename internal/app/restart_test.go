package app_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/core"
)

func TestSessionsSurviveRestart(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	sid := n.session()
	m := n.send(sid, "reply:persisted")
	n2 := n.restart()
	s, err := n2.c.Session(t.Context(), sid)
	if err != nil || s.ID != sid {
		t.Fatalf("session after restart: %+v %v", s, err)
	}
	msgs := mustMessages(t, n2, sid)
	if len(msgs) != 2 || msgs[1].Info.ID != m.Info.ID || textOf(msgs[1]) != "persisted" {
		t.Fatalf("messages after restart = %+v", msgs)
	}
	st := n2.status(sid)
	if st.Type != core.StatusIdle || st.Last.Outcome != core.RunSucceeded {
		t.Errorf("status after restart = %+v", st)
	}
}

// streamingStarted waits until the session's latest assistant message has
// streamed text into the store.
func (n *node) streamingStarted(sid string, after string) {
	n.t.Helper()
	n.waitTranscript(sid, func(msgs []core.MessageWithParts) bool {
		for _, m := range msgs {
			if m.Info.Role != core.RoleAssistant || m.Info.ID <= after || m.Info.Completed != 0 {
				continue
			}
			for _, p := range m.Parts {
				if p.Type == core.PartText && strings.Contains(p.Text, "tick") {
					return true
				}
			}
		}
		return false
	})
}

func TestGracefulShutdownResumes(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	sid := n.session()
	if err := n.c.SendAsync(t.Context(), sid, client.Prompt{Text: "sleep:40\nreply:done"}); err != nil {
		t.Fatal(err)
	}
	n.streamingStarted(sid, "")
	n2 := n.restart()
	st := n2.waitIdle(sid)
	if st.Last == nil || st.Last.Outcome != core.RunSucceeded {
		t.Fatalf("resumed run ended %+v", st.Last)
	}
	msgs := mustMessages(t, n2, sid)
	var cut, answered int
	for _, m := range msgs {
		if m.Info.Role != core.RoleAssistant {
			continue
		}
		if m.Info.Error != nil && m.Info.Error.Name == core.ErrNameAborted && strings.Contains(m.Info.Error.Data.Message, "restart") {
			cut++
			if !strings.Contains(textOf(m), "tick 1") {
				t.Errorf("cut-off message lost its persisted text: %q", textOf(m))
			}
		}
		if strings.HasSuffix(textOf(m), "done") {
			answered++
		}
	}
	if cut != 1 || answered != 1 {
		t.Errorf("cut-off messages = %d, answers = %d; want 1 and 1", cut, answered)
	}
	sawRecovering := false
	for _, ev := range n2.allEvents() {
		if ev.Type == core.EventRunUpdated && strings.Contains(string(ev.Properties), `"phase":"recovering"`) {
			sawRecovering = true
		}
	}
	if !sawRecovering {
		t.Error("no busy/recovering status was published")
	}
	checkOneEndPerRun(t, n2, 1)
}

// TestInterruptedToolNotReplayed stops the server while a tool runs. The
// tool part must become an error the model sees, and the tool must not run
// again.
func TestInterruptedToolNotReplayed(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	sid := n.session()
	if err := n.c.SendAsync(t.Context(), sid, client.Prompt{Text: "tool:block:{}"}); err != nil {
		t.Fatal(err)
	}
	n.waitToolRunning(sid)
	n2 := n.restart()
	st := n2.waitIdle(sid)
	if st.Last.Outcome != core.RunSucceeded {
		t.Fatalf("outcome = %+v", st.Last)
	}
	var tools []core.Part
	var answer string
	for _, m := range mustMessages(t, n2, sid) {
		for _, p := range m.Parts {
			if p.Type == core.PartTool {
				tools = append(tools, p)
			}
		}
		if m.Info.Role == core.RoleAssistant && textOf(m) != "" {
			answer = textOf(m)
		}
	}
	if len(tools) != 1 {
		t.Fatalf("tool parts = %d, want 1 (never re-executed)", len(tools))
	}
	p := tools[0]
	if p.State.Status != core.ToolError || p.State.Error != "interrupted by server restart; outcome unknown" || p.State.Metadata["interrupted"] != true {
		t.Errorf("interrupted tool part = %+v", p.State)
	}
	if !strings.Contains(answer, "interrupted by server restart") {
		t.Errorf("the model did not see the interruption: %q", answer)
	}
}

func TestResumeDisabled(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	sid := n.session()
	if err := n.c.SendAsync(t.Context(), sid, client.Prompt{Text: "sleep:40"}); err != nil {
		t.Fatal(err)
	}
	n.streamingStarted(sid, "")
	n2 := n.restart(func(c *app.Config) { c.Engine.Resume = false })
	// Recovery happens before the listener accepts requests: the first
	// status read already tells the truth.
	st := n2.status(sid)
	if st.Type != core.StatusIdle || st.Last.Outcome != core.RunInterrupted || st.Last.Reason != core.ReasonServerRestart {
		t.Fatalf("status after restart with resume off = %+v", st)
	}
	checkOneEndPerRun(t, n2, 1)
}

func TestCrashLoopBound(t *testing.T) {
	t.Parallel()
	n := startNode(t, func(c *app.Config) { c.Engine.MaxResumes = 2 })
	sid := n.session()
	if err := n.c.SendAsync(t.Context(), sid, client.Prompt{Text: "sleep:500"}); err != nil {
		t.Fatal(err)
	}
	last := ""
	for range 2 {
		n.streamingStarted(sid, last)
		msgs := mustMessages(t, n, sid)
		last = msgs[len(msgs)-1].Info.ID
		n = n.restart()
	}
	n.streamingStarted(sid, last)
	n = n.restart()
	st := n.status(sid)
	if st.Type != core.StatusIdle || st.Last.Outcome != core.RunFailed || st.Last.Reason != core.ReasonCrashLoop {
		t.Fatalf("status = %+v, want failed/crash_loop", st)
	}
	runs, _ := n.c.Runs(t.Context(), sid)
	if len(runs) != 1 {
		t.Fatalf("runs = %d", len(runs))
	}
	b, _ := json.Marshal(runs[0])
	if !strings.Contains(string(b), `"resumes":2`) {
		t.Errorf("run = %s", b)
	}
	checkOneEndPerRun(t, n, 1)
}

// TestOneProcessPerDatabase: a second node on the same database refuses
// to start and names the first; once the first stops, it starts.
func TestOneProcessPerDatabase(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	cfg := n.cfg
	_, err := app.Start(t.Context(), cfg)
	if err == nil {
		t.Fatal("a second node started on the same database")
	}
	if !strings.Contains(err.Error(), "pid") || !strings.Contains(err.Error(), n.app.URL()) {
		t.Errorf("the refusal does not name the owner: %v", err)
	}
	// Another path to the same file meets the same lock.
	link := filepath.Join(t.TempDir(), "link.db")
	if err := os.Symlink(cfg.DBPath, link); err != nil {
		t.Fatal(err)
	}
	viaLink := cfg
	viaLink.DBPath = link
	if _, err := app.Start(t.Context(), viaLink); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("a second node started through a symlink: %v", err)
	}
	n2 := n.restart()
	if _, err := n2.c.Health(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestDatabaseReplacedUnderServer: once the database file is deleted or
// replaced, health says so and writes are refused with a clear error,
// instead of being acknowledged into a file nobody will read again.
func TestDatabaseReplacedUnderServer(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	sid := n.session()
	if err := os.Rename(n.cfg.DBPath, n.cfg.DBPath+".moved"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(n.app.URL() + "/global/health")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(body), "deleted or replaced") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("health still %d %s", resp.StatusCode, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Prompts at once, so that their reads need reader connections the
	// node had not opened before the move: each must still get the clear
	// error (one such read found an empty database created at the path
	// and answered 500 "internal error").
	// Half of them through opencode 2's API, which names the cause too.
	var wg sync.WaitGroup
	for i := range 16 {
		path, body := "/session/"+sid+"/prompt_async", `{"parts":[{"type":"text","text":"hi"}]}`
		if i%2 == 1 {
			path, body = "/api/session/"+sid+"/prompt", `{"prompt":{"text":"hi"}}`
		}
		wg.Go(func() {
			resp, err := http.Post(n.app.URL()+path, "application/json", strings.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "deleted or replaced") {
				t.Errorf("prompt through %s after the database was replaced: %d %s", path, resp.StatusCode, body)
			}
		})
	}
	wg.Wait()
	if _, err := os.Stat(n.cfg.DBPath); err == nil {
		t.Error("a database was created where the moved one was")
	}
}
