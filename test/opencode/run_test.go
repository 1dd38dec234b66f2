package opencode_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// opencodeRun is one finished `opencode run --attach` process.
type opencodeRun struct {
	stdout, stderr string
	code           int
}

// runCommand prepares `opencode run --attach` against the node, in its
// workspace, with a private home.
func (n *node) runCommand(ctx context.Context, t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	cmd := exec.CommandContext(ctx, opencodeBin, append([]string{"run", "--attach", n.rec.URL()}, args...)...)
	cmd.Env = append(opencodeEnv(t.TempDir()), "PWD="+n.dir)
	cmd.Dir = n.dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	return cmd, &stdout, &stderr
}

// opencode runs `opencode run --attach URL args…` to its end.
func (n *node) opencode(t *testing.T, args ...string) opencodeRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cmd, stdout, stderr := n.runCommand(ctx, t, args...)
	err := cmd.Run()
	r := opencodeRun{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("opencode run: %v\nstderr: %s", err, r.stderr)
	}
	t.Logf("opencode run %s → exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	return r
}

// sessions lists the node's sessions, newest first, from the store.
func (n *node) sessions(t *testing.T) []core.Session {
	t.Helper()
	list, err := n.app.Store.Sessions(t.Context(), store.SessionQuery{})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// transcript returns a session's messages from the store.
func (n *node) transcript(t *testing.T, sessionID string) []core.MessageWithParts {
	t.Helper()
	msgs, err := n.app.Store.Messages(t.Context(), sessionID, store.MessageQuery{})
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// lastRun returns the session's newest run.
func (n *node) lastRun(t *testing.T, sessionID string) core.Run {
	t.Helper()
	runs, err := n.app.Store.Runs(t.Context(), sessionID, 1)
	if err != nil || len(runs) == 0 {
		t.Fatalf("runs of %s: %v %v", sessionID, runs, err)
	}
	return runs[0]
}

func texts(msgs []core.MessageWithParts, role string) []string {
	var out []string
	for _, m := range msgs {
		if m.Info.Role != role {
			continue
		}
		for _, p := range m.Parts {
			if p.Type == core.PartText && p.Text != "" {
				out = append(out, p.Text)
			}
		}
	}
	return out
}

// TestRunAttach drives the real `opencode run --attach` against agentd
// and checks what it prints, how it exits and what agentd holds after.
func TestRunAttach(t *testing.T) {
	n := startNode(t, "")

	t.Run("plain prompt", func(t *testing.T) {
		r := n.opencode(t, "reply:hello-from-agentd")
		if r.code != 0 || !strings.Contains(r.stdout, "hello-from-agentd") {
			t.Fatalf("exit %d, stdout %q", r.code, r.stdout)
		}
		if strings.Contains(r.stdout, "reply:") {
			t.Errorf("the prompt itself was printed as an answer: %q", r.stdout)
		}
		if !strings.Contains(r.stderr, "build · scripted") {
			t.Errorf("no agent/model header on stderr: %q", r.stderr)
		}
		s := n.sessions(t)[0]
		msgs := n.transcript(t, s.ID)
		if got := texts(msgs, core.RoleUser); len(got) != 1 || got[0] != "reply:hello-from-agentd" {
			t.Errorf("user messages = %q", got)
		}
		if got := texts(msgs, core.RoleAssistant); len(got) != 1 || got[0] != "hello-from-agentd" {
			t.Errorf("answers = %q", got)
		}
		if run := n.lastRun(t, s.ID); run.State != core.RunSucceeded {
			t.Errorf("run = %s", run.State)
		}
	})

	t.Run("tool calls", func(t *testing.T) {
		r := n.opencode(t, `tool:read:{"filePath":"hello.txt"}`)
		if r.code != 0 || !strings.Contains(r.stdout, "hello from the workspace") {
			t.Fatalf("exit %d, stdout %q", r.code, r.stdout)
		}
		if !strings.Contains(r.stderr, "hello.txt") {
			t.Errorf("the tool call is not shown: %q", r.stderr)
		}
		msgs := n.transcript(t, n.sessions(t)[0].ID)
		var tools []core.Part
		for _, m := range msgs {
			for _, p := range m.Parts {
				if p.Type == core.PartTool {
					tools = append(tools, p)
				}
			}
		}
		if len(tools) != 1 || tools[0].Tool != "read" || tools[0].State.Status != core.ToolCompleted ||
			!strings.Contains(tools[0].State.Output, "hello from the workspace") {
			t.Errorf("tool parts = %+v", tools)
		}
	})

	t.Run("title, continue and session", func(t *testing.T) {
		r := n.opencode(t, "--title", "named by opencode", "reply:first")
		if r.code != 0 {
			t.Fatalf("exit %d", r.code)
		}
		s := n.sessions(t)[0]
		if s.Title != "named by opencode" {
			t.Errorf("title = %q", s.Title)
		}
		r = n.opencode(t, "--continue", "reply:second")
		if r.code != 0 || !strings.Contains(r.stdout, "second") {
			t.Fatalf("continue: exit %d, stdout %q", r.code, r.stdout)
		}
		if got := texts(n.transcript(t, s.ID), core.RoleAssistant); len(got) != 2 || got[1] != "second" {
			t.Errorf("continue did not answer in the last session: %q", got)
		}
		// An older session, by id.
		older := n.sessions(t)[1]
		before := len(n.transcript(t, older.ID))
		r = n.opencode(t, "-s", older.ID, "reply:third")
		if r.code != 0 || !strings.Contains(r.stdout, "third") {
			t.Fatalf("-s: exit %d, stdout %q", r.code, r.stdout)
		}
		if after := len(n.transcript(t, older.ID)); after != before+2 {
			t.Errorf("-s %s: %d messages, want %d", older.ID, after, before+2)
		}
		r = n.opencode(t, "-s", "ses_doesnotexist", "reply:x")
		if r.code == 0 || !strings.Contains(r.stderr, "Session not found") {
			t.Errorf("unknown session: exit %d, stderr %q", r.code, r.stderr)
		}
	})

	// The fork's copies of the original's messages are not printed as
	// if they were the new turn's output (the stream's replay window
	// stops at the fork); only the new answer is.
	t.Run("fork", func(t *testing.T) {
		orig := n.sessions(t)[0]
		before := n.transcript(t, orig.ID)
		earlier := texts(before, core.RoleAssistant)
		if len(earlier) == 0 {
			t.Fatal("the original has no answers to copy")
		}
		r := n.opencode(t, "-s", orig.ID, "--fork", "reply:in-the-fork")
		if r.code != 0 || !strings.Contains(r.stdout, "in-the-fork") {
			t.Fatalf("--fork: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		for _, answer := range earlier {
			if strings.Contains(r.stdout, answer) {
				t.Errorf("--fork printed the copied answer %q: %q", answer, r.stdout)
			}
		}
		js := n.opencode(t, "-s", orig.ID, "--fork", "--format", "json", "reply:json-fork")
		if n := strings.Count("\n"+js.stdout, "\n{\"type\":\"text\""); js.code != 0 || n != 1 || !strings.Contains(js.stdout, "json-fork") {
			t.Errorf("--fork --format json printed %d text events: %q", n, js.stdout)
		}
		fork := n.sessions(t)[0]
		if fork.ID == orig.ID {
			t.Fatal("--fork answered in the original session")
		}
		if got := n.transcript(t, fork.ID); len(got) != len(before)+2 {
			t.Errorf("the fork holds %d messages, want the original's %d and the new turn", len(got), len(before))
		}
		if after := n.transcript(t, orig.ID); len(after) != len(before) {
			t.Errorf("the original changed: %d messages, had %d", len(after), len(before))
		}
	})

	t.Run("command init", func(t *testing.T) {
		r := n.opencode(t, "--command", "init")
		if r.code != 0 {
			t.Fatalf("--command init: exit %d, stderr %q", r.code, r.stderr)
		}
		msgs := n.transcript(t, n.sessions(t)[0].ID)
		if got := texts(msgs, core.RoleUser); len(got) == 0 || !strings.Contains(got[len(got)-1], "AGENTS.md") {
			t.Errorf("the init prompt was not sent: %q", got)
		}
	})

	t.Run("format json", func(t *testing.T) {
		r := n.opencode(t, "--format", "json", `tool:read:{"filePath":"hello.txt"}`+"\n"+"reply:json-answer")
		if r.code != 0 {
			t.Fatalf("exit %d", r.code)
		}
		types := map[string]int{}
		var text string
		sc := bufio.NewScanner(strings.NewReader(r.stdout))
		for sc.Scan() {
			var line struct {
				Type string `json:"type"`
				Part struct {
					Text string `json:"text"`
					Tool string `json:"tool"`
				} `json:"part"`
			}
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
				t.Fatalf("not a JSON line: %q", sc.Text())
			}
			types[line.Type]++
			if line.Type == "text" && line.Part.Text != "" {
				// The run's idle part is an empty text part; skip it.
				text = line.Part.Text
			}
		}
		if types["step_start"] == 0 || types["step_finish"] == 0 || types["tool_use"] != 1 || !strings.HasPrefix(text, "json-answer") {
			t.Errorf("json events = %v, text %q", types, text)
		}
	})

	t.Run("model flag", func(t *testing.T) {
		r := n.opencode(t, "-m", "fake/fake-model", "reply:from-the-fake-provider")
		if r.code != 0 || !strings.Contains(r.stdout, "from-the-fake-provider") {
			t.Fatalf("exit %d, stdout %q", r.code, r.stdout)
		}
		msgs := n.transcript(t, n.sessions(t)[0].ID)
		last := msgs[len(msgs)-1].Info
		if last.ProviderID != "fake" || last.ModelID != "fake-model" {
			t.Errorf("answered by %s/%s", last.ProviderID, last.ModelID)
		}
	})

	// opencode run --attach exits 0 after a failed run, as it does
	// against opencode serve: the blocking prompt answers 200 with the
	// error in the message, as opencode's does, and with --attach opencode
	// run exits once the prompt has answered, whether or not its event
	// stream has printed the session.error yet (agentd run, and clients
	// that send X-Agentd-Errors: status, get an error status instead).
	t.Run("failing run", func(t *testing.T) {
		r := n.opencode(t, "fail:400")
		if r.code != 0 && !strings.Contains(r.stderr, "scripted failure 400") {
			t.Errorf("exit %d without the provider's error: %q", r.code, r.stderr)
		}
		run := n.lastRun(t, n.sessions(t)[0].ID)
		if run.State != core.RunFailed || run.Reason != core.ReasonProviderError {
			t.Errorf("run = %s/%s", run.State, run.Reason)
		}
	})

	// opencode run rejects a permission it cannot ask about; the turn
	// ends there, as on opencode serve: the call fails, the model is not
	// called again, the run is interrupted/rejected.
	t.Run("a rejected permission ends the turn", func(t *testing.T) {
		// No space in the argument: opencode run quotes those.
		r := n.opencode(t, `tool:bash:{"command":"rm\tnothing-here"}`+"\nreply:never-said")
		if r.code != 0 || strings.Contains(r.stdout, "never-said") {
			t.Errorf("exit %d, stdout %q", r.code, r.stdout)
		}
		s := n.sessions(t)[0]
		if run := n.lastRun(t, s.ID); run.State != core.RunInterrupted || run.Reason != core.ReasonRejected {
			t.Errorf("run = %s/%s, want interrupted/rejected", run.State, run.Reason)
		}
		if got := texts(n.transcript(t, s.ID), core.RoleAssistant); len(got) != 0 {
			t.Errorf("the model answered after the rejection: %q", got)
		}
	})

	t.Run("ctrl-c aborts the run", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		cmd, _, stderr := n.runCommand(ctx, t, "sleep:60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var sid string
		waitUntil(t, "the run to start", func() bool {
			list := n.sessions(t)
			if len(list) == 0 {
				return false
			}
			st, err := n.app.Store.SessionStatus(t.Context(), list[0].ID)
			if err == nil && st.Type == core.StatusBusy && len(texts(n.transcript(t, list[0].ID), core.RoleUser)) == 1 &&
				texts(n.transcript(t, list[0].ID), core.RoleUser)[0] == "sleep:60" {
				sid = list[0].ID
				return true
			}
			return false
		})
		start := time.Now()
		_ = cmd.Process.Signal(syscall.SIGINT)
		err := cmd.Wait()
		t.Logf("opencode after SIGINT: %v, stderr %q", err, stderr.String())
		waitUntil(t, "the run to end", func() bool {
			return core.TerminalState(n.lastRun(t, sid).State)
		})
		run := n.lastRun(t, sid)
		if run.State != core.RunInterrupted || run.Reason != core.ReasonAborted {
			t.Errorf("run = %s/%s, want interrupted/aborted", run.State, run.Reason)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("the run ended %v after Ctrl-C", d)
		}
	})

	n.rec.check(t)
}

// TestRunFormatJSONNeverEmpty: `opencode run --format json` prints every
// event of its run, in opencode's order (a tool call before its step's
// end, the text once, no empty text for the run's end), run after run.
func TestRunFormatJSONNeverEmpty(t *testing.T) {
	n := startNode(t, "")
	runs := 100
	if testing.Short() {
		runs = 10
	}
	empty := 0
	for i := range runs {
		r := n.opencode(t, "--format", "json", `tool:read:{"filePath":"hello.txt"}`+"\nreply:answer-"+strconv.Itoa(i))
		if r.code != 0 {
			t.Fatalf("run %d: exit %d", i, r.code)
		}
		var order []string
		texts := 0
		sc := bufio.NewScanner(strings.NewReader(r.stdout))
		for sc.Scan() {
			var line struct {
				Type string `json:"type"`
				Part struct {
					Text string `json:"text"`
				} `json:"part"`
			}
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
				t.Fatalf("run %d: not a JSON line: %q", i, sc.Text())
			}
			order = append(order, line.Type)
			if line.Type == "text" {
				texts++
				if line.Part.Text == "" {
					t.Errorf("run %d: an empty text event (the run's end rendered as text)", i)
				}
			}
		}
		if len(order) == 0 {
			empty++
			continue
		}
		want := "step_start,tool_use,step_finish,step_start,text,step_finish"
		if got := strings.Join(order, ","); got != want || texts != 1 {
			t.Errorf("run %d: events %s, want %s", i, got, want)
		}
	}
	if empty > 0 {
		t.Errorf("%d of %d runs printed nothing", empty, runs)
	}
}
