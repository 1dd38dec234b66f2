package torture

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/fakellm"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/sqlite"
	"github.com/agentd/agentd/internal/testbin"
)

// agentdBinary is the agentd binary, built once for the package's tests.
func agentdBinary(t *testing.T) string { return testbin.Agentd(t) }

// crashNode is the real agentd binary on a database of its own, with
// fakellm (one "second" = unit) as the provider "fake" whose model has the
// given limits block.
func crashNode(t *testing.T, unit time.Duration, model string) (*server, *client.Client, string) {
	t.Helper()
	return crashNodeWith(t, unit, model, "")
}

// crashNodeWith is crashNode with more top-level keys of agentd.json.
func crashNodeWith(t *testing.T, unit time.Duration, model, extra string) (*server, *client.Client, string) {
	t.Helper()
	bin := agentdBinary(t)
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	os.MkdirAll(ws, 0o755)
	fake := fakellm.New(fakellm.Options{Second: unit})
	hs := httptest.NewServer(fake.Handler())
	t.Cleanup(hs.Close)
	cfgPath := filepath.Join(dir, "agentd.json")
	os.WriteFile(cfgPath, []byte(`{"model":"fake/fake-model","provider":{"fake":{"npm":"@ai-sdk/openai-compatible",
		"options":{"baseURL":"`+hs.URL+`/v1"},"models":{"fake-model":`+model+`}}},"permission":{"bash":"allow","external_directory":"allow"}`+extra+`}`), 0o644)
	port := freePort(t)
	dbPath := filepath.Join(dir, "agentd.db")
	logFile, _ := os.Create(filepath.Join(dir, "agentd.log"))
	t.Cleanup(func() { logFile.Close() })
	srv := &server{t: t, bin: bin, dir: ws, url: "http://127.0.0.1:" + strconv.Itoa(port), logFile: logFile,
		args: []string{"serve", "--port", strconv.Itoa(port), "--db", dbPath, "--config", cfgPath, "--log-level", "warn"}}
	srv.start()
	t.Cleanup(srv.stop)
	return srv, client.New(srv.url), dbPath
}

// waitStatus polls one session's status until ok holds.
func waitStatus(t *testing.T, c *client.Client, sid string, ok func(core.SessionStatus) bool) core.SessionStatus {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := c.Status(t.Context(), sid)
		if err == nil && ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("status never reached; last %+v %v", st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkStore opens the database after the server stopped and checks its
// integrity and that every run ended exactly once.
func checkStore(t *testing.T, dbPath string) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), dbPath, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if res, err := st.IntegrityCheck(context.Background()); err != nil || res != "ok" {
		t.Errorf("integrity: %s %v", res, err)
	}
	ends := map[string]int{}
	var after int64
	for {
		evs, err := st.Events(context.Background(), store.EventQuery{After: after, Limit: 5000})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			var p core.RunProps
			if ev.Type == core.EventRunUpdated && json.Unmarshal(ev.Properties, &p) == nil && core.TerminalState(p.Run.State) {
				ends[p.Run.ID]++
			}
		}
		if len(evs) < 5000 {
			break
		}
		after = evs[len(evs)-1].Seq
	}
	for id, n := range ends {
		if n != 1 {
			t.Errorf("run %s ended %d times", id, n)
		}
	}
}

// TestKillDuringCompaction kills agentd while the model writes a summary,
// restarts it, and checks that the run finishes with a completed
// compaction and nothing of the transcript lost.
func TestKillDuringCompaction(t *testing.T) {
	srv, c, dbPath := crashNode(t, 200*time.Millisecond, `{"limit":{"context":4000,"output":500}}`)
	ctx := t.Context()
	s, err := c.CreateSession(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("word ", 600)
	for _, p := range []string{"reply:FIRST " + long, "summarysleep:10\nreply:SECOND " + long} {
		if _, err := c.Send(ctx, s.ID, client.Prompt{Text: p}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.SendAsync(ctx, s.ID, client.Prompt{Text: "reply:THIRD " + long}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, s.ID, func(st core.SessionStatus) bool { return st.Phase == core.PhaseCompacting })
	time.Sleep(300 * time.Millisecond) // the summary is being written
	srv.kill()
	srv.start()
	st, err := c.Wait(ctx, s.ID, "", time.Minute)
	if err != nil || st.Last == nil || st.Last.Outcome != core.RunSucceeded {
		t.Fatalf("after the restart: %+v %v", st, err)
	}
	msgs, err := c.Messages(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	var prompts, cut, done int
	for _, m := range msgs {
		if m.Info.Summary {
			if m.Info.Error != nil {
				cut++
			} else if m.Info.Completed != 0 {
				done++
			}
		}
		for _, p := range m.Parts {
			if p.Type == core.PartText && m.Info.Role == core.RoleUser {
				prompts++
			}
		}
	}
	if prompts != 3 || cut != 1 || done < 1 {
		t.Errorf("prompts %d (want 3), summaries cut off %d (want 1), completed %d (want ≥ 1)", prompts, cut, done)
	}
	last := msgs[len(msgs)-1]
	if !strings.Contains(textOfParts(last.Parts), "THIRD") {
		t.Errorf("the last answer is %q", textOfParts(last.Parts))
	}
	srv.stop()
	checkStore(t, dbPath)
}

// TestKillDuringTitle kills agentd while a title is being written: the
// restarted server is consistent (the session keeps its first title, the
// run ends once) and the next prompt writes the title.
func TestKillDuringTitle(t *testing.T) {
	srv, c, dbPath := crashNode(t, 200*time.Millisecond, `{"limit":{"context":100000,"output":4000}}`)
	ctx := t.Context()
	s, err := c.CreateSession(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	// The title request sleeps as long as the run does.
	if err := c.SendAsync(ctx, s.ID, client.Prompt{Text: "title:Lost title\nsleep:20\nreply:first"}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, s.ID, func(st core.SessionStatus) bool { return st.Type == core.StatusBusy })
	time.Sleep(400 * time.Millisecond)
	srv.kill()
	srv.start()
	got, err := c.Session(ctx, s.ID)
	if err != nil || !core.IsDefaultTitle(got.Title) {
		t.Errorf("after the restart the title is %q (%v), want the first one", got.Title, err)
	}
	if _, err := c.Abort(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, s.ID, client.Prompt{Text: "title:Written after the restart\nreply:second"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, _ = c.Session(ctx, s.ID)
		if got.Title == "Written after the restart" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("title = %q", got.Title)
		}
		time.Sleep(20 * time.Millisecond)
	}
	srv.stop()
	checkStore(t, dbPath)
}

func textOfParts(parts []core.Part) string {
	var s string
	for _, p := range parts {
		if p.Type == core.PartText {
			s += p.Text
		}
	}
	return s
}

// TestKillLeavesNoToolProcesses: a kill -9 of agentd while a tool runs,
// with a child that left the tool's process group, leaves no process
// behind once the server is back.
func TestKillLeavesNoToolProcesses(t *testing.T) {
	srv, c, _ := crashNode(t, 200*time.Millisecond, `{"limit":{"context":100000,"output":4000}}`)
	ctx := t.Context()
	s, err := c.CreateSession(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	cmd := `setsid sh -c 'echo $$ > escaped.pid; sleep 600' & echo $$ > shell.pid; sleep 600`
	if err := c.SendAsync(ctx, s.ID, client.Prompt{Text: "tool:bash:" + mustJSON(map[string]string{"command": cmd})}); err != nil {
		t.Fatal(err)
	}
	var pids []int
	deadline := time.Now().Add(20 * time.Second)
	for len(pids) < 2 {
		pids = pids[:0]
		for _, f := range []string{"escaped.pid", "shell.pid"} {
			b, _ := os.ReadFile(filepath.Join(srv.dir, f))
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				pids = append(pids, pid)
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the tool never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	srv.kill()
	srv.start()
	deadline = time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for processAlive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if processAlive(pid) {
			t.Errorf("process %d of the killed server's tool call is still running", pid)
		}
	}
	st, err := c.Wait(ctx, s.ID, "", time.Minute)
	if err != nil || st.Last == nil {
		t.Fatalf("after the restart: %+v %v", st, err)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// processAlive reports whether pid runs (zombies have ended).
func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// TestKillWhileSubagentRuns: kill -9 while a task call's child session
// runs a tool. After the restart the parent waits for the same child (no
// second child), the child's cut-off tool call is "outcome unknown" and
// never run again, the child answers, and the parent gets that answer.
func TestKillWhileSubagentRuns(t *testing.T) {
	srv, c, dbPath := crashNode(t, 20*time.Millisecond, `{"limit":{"context":100000,"output":4000}}`)
	ctx := t.Context()
	s, err := c.CreateSession(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	child := `tool:bash:{"command":"echo ran >> child-tool.txt; sleep 30"}` + "\nreply:child answer"
	b, _ := json.Marshal(child)
	err = c.SendAsync(ctx, s.ID, client.Prompt{Text: `tool:task:{"description":"dig","prompt":` + string(b) +
		`,"subagent_type":"general"}` + "\nreply:parent answer"})
	if err != nil {
		t.Fatal(err)
	}
	counter := filepath.Join(srv.dir, "child-tool.txt")
	deadline := time.Now().Add(20 * time.Second)
	for {
		if b, _ := os.ReadFile(counter); len(b) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the child's tool never ran")
		}
		time.Sleep(20 * time.Millisecond)
	}
	srv.kill()
	srv.start()
	st, err := c.Wait(ctx, s.ID, "", time.Minute)
	if err != nil || st.Last == nil || st.Last.Outcome != core.RunSucceeded {
		t.Fatalf("parent after the restart: %+v %v", st, err)
	}
	all, err := c.Sessions(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var kids []string
	for _, x := range all {
		if x.ParentID == s.ID {
			kids = append(kids, x.ID)
		}
	}
	if len(kids) != 1 {
		t.Fatalf("%d child sessions after the restart, want the same one", len(kids))
	}
	if b, _ := os.ReadFile(counter); strings.Count(string(b), "ran") != 1 {
		t.Errorf("the child's tool ran %d times", strings.Count(string(b), "ran"))
	}
	kidMsgs, _ := c.Messages(ctx, kids[0])
	if !strings.Contains(mustJSON(kidMsgs), "outcome unknown") {
		t.Error("the child's cut-off tool call was not closed as outcome unknown")
	}
	msgs, _ := c.Messages(ctx, s.ID)
	var out string
	for _, m := range msgs {
		for _, p := range m.Parts {
			if p.Type == core.PartTool && p.Tool == "task" {
				out = p.State.Output
			}
		}
	}
	if !strings.Contains(out, "child answer") || !strings.Contains(out, kids[0]) {
		t.Errorf("the parent's task result %q lacks the child's answer", out)
	}
	srv.stop()
	checkStore(t, dbPath)
}

// TestKillDuringMCPCall: kill -9 while an MCP tool call runs. After the
// restart the call is "outcome unknown" and is never sent again; the run
// goes on and ends once.
func TestKillDuringMCPCall(t *testing.T) {
	dir := t.TempDir()
	bin := testbin.MCPServer(t)
	log := filepath.Join(dir, "calls.log")
	srv, c, dbPath := crashNodeWith(t, 20*time.Millisecond, `{"limit":{"context":100000,"output":4000}}`,
		`,"mcp":{"test":{"type":"local","command":["`+bin+`","-log","`+log+`"]}}`)
	ctx := t.Context()
	s, err := c.CreateSession(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SendAsync(ctx, s.ID, client.Prompt{Text: `tool:test_sleep:{"seconds":30}` + "\nreply:after the call"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if b, _ := os.ReadFile(log); strings.Contains(string(b), "sleep started") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the MCP call never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	srv.kill()
	srv.start()
	st, err := c.Wait(ctx, s.ID, "", time.Minute)
	if err != nil || st.Last == nil || st.Last.Outcome != core.RunSucceeded {
		t.Fatalf("after the restart: %+v %v", st, err)
	}
	msgs, _ := c.Messages(ctx, s.ID)
	if !strings.Contains(mustJSON(msgs), "outcome unknown") {
		t.Error("the cut-off MCP call was not closed as outcome unknown")
	}
	time.Sleep(200 * time.Millisecond)
	if b, _ := os.ReadFile(log); strings.Count(string(b), "sleep started") != 1 {
		t.Errorf("the MCP call was sent %d times: %q", strings.Count(string(b), "sleep started"), b)
	}
	srv.stop()
	checkStore(t, dbPath)
}
