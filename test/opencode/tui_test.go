package opencode_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/testenv"
)

// tui is opencode's TUI (`opencode attach URL`) running in a detached tmux
// session on a private tmux server.
type tui struct {
	t      *testing.T
	socket string
}

func startTUI(t *testing.T, n *node) *tui {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("AGENTD_OPENCODE_REQUIRED") != "" {
			t.Fatal("tmux is not installed")
		}
		testenv.Skip(t, testenv.Tmux, "tmux is not installed")
	}
	home := t.TempDir()
	env := opencodeEnv(home)
	script := filepath.Join(home, "tui.sh")
	var sb strings.Builder
	sb.WriteString("#!/bin/sh\n")
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		fmt.Fprintf(&sb, "export %s='%s'\n", k, strings.ReplaceAll(v, "'", `'\''`))
	}
	fmt.Fprintf(&sb, "cd '%s'\nexec '%s' attach '%s' 2>'%s'\n", n.dir, opencodeBin, n.rec.URL(), filepath.Join(home, "tui.err"))
	if err := os.WriteFile(script, []byte(sb.String()), 0o755); err != nil {
		t.Fatal(err)
	}
	u := &tui{t: t, socket: fmt.Sprintf("agentd-test-%d", os.Getpid())}
	u.tmux("new-session", "-d", "-s", "oc", "-x", "160", "-y", "48", script)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last screen:\n%s", u.screen())
			if b, err := os.ReadFile(filepath.Join(home, "tui.err")); err == nil && len(b) > 0 {
				t.Logf("TUI stderr:\n%s", b)
			}
		}
		_ = exec.Command("tmux", "-L", u.socket, "kill-server").Run()
	})
	return u
}

func (u *tui) tmux(args ...string) string {
	u.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", u.socket}, args...)...).CombinedOutput()
	if err != nil {
		u.t.Fatalf("tmux %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (u *tui) screen() string {
	out, _ := exec.Command("tmux", "-L", u.socket, "capture-pane", "-p", "-t", "oc").CombinedOutput()
	return string(out)
}

// keys sends tmux key names (Enter, Escape, C-x …).
func (u *tui) keys(keys ...string) {
	u.t.Helper()
	u.tmux(append([]string{"send-keys", "-t", "oc"}, keys...)...)
}

// typeText types literal text.
func (u *tui) typeText(s string) {
	u.t.Helper()
	u.tmux("send-keys", "-t", "oc", "-l", s)
}

// waitFor waits until the screen shows every one of the texts.
func (u *tui) waitFor(what string, texts ...string) string {
	u.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := u.screen()
		ok := true
		for _, x := range texts {
			ok = ok && strings.Contains(s, x)
		}
		if ok {
			return s
		}
		if time.Now().After(deadline) {
			u.t.Fatalf("the TUI never showed %s (%q)", what, texts)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitGone waits until the screen no longer shows text.
func (u *tui) waitGone(what, text string) {
	u.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for strings.Contains(u.screen(), text) {
		if time.Now().After(deadline) {
			u.t.Fatalf("the TUI still shows %s (%q)", what, text)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestTUI starts opencode's TUI against agentd under tmux: it lists
// sessions, opens one, sends prompts, renders the streamed answer and the
// tool calls, and aborts a run with its key binding. Every request it
// makes is answered (no 404, no 5xx) and judged by opencode's schemas.
func TestTUI(t *testing.T) {
	n := startNode(t, "")
	var earlier struct {
		ID string `json:"id"`
	}
	n.call(t, "POST", "/session", map[string]any{"title": "an earlier session"}, &earlier)
	n.call(t, "POST", "/session/"+earlier.ID+"/message", map[string]any{"parts": []map[string]any{{"type": "text", "text": "reply:answered before the TUI started"}}}, nil)

	u := startTUI(t, n)
	u.waitFor("its prompt", "Ask anything", "Scripted (offline)")

	// The session list, and an earlier session opened from it.
	u.keys("C-x")
	u.keys("l")
	u.waitFor("the session list", "Sessions", "an earlier session")
	u.typeText("earlier")
	time.Sleep(300 * time.Millisecond)
	u.keys("Enter")
	u.waitFor("the earlier session's transcript", "answered before the TUI started")

	// A prompt with a tool call, in that session.
	u.typeText(`tool:read:{"filePath":"hello.txt"}`)
	u.keys("Enter")
	u.waitFor("the tool call and the answer", "Read", "hello.txt", "tool read returned")

	// A streamed answer, aborted with Escape twice.
	u.typeText("sleep:60")
	u.keys("Enter")
	u.waitFor("streamed text", "tick 2", "esc interrupt")
	u.keys("Escape")
	time.Sleep(200 * time.Millisecond)
	u.keys("Escape")
	u.waitFor("the interruption", "interrupted")

	run := n.lastRun(t, earlier.ID)
	if run.State != core.RunInterrupted || run.Reason != core.ReasonAborted {
		t.Errorf("last run = %s/%s, want interrupted/aborted", run.State, run.Reason)
	}
	msgs := n.transcript(t, earlier.ID)
	if got := texts(msgs, core.RoleUser); len(got) != 3 || got[1] != `tool:read:{"filePath":"hello.txt"}` || got[2] != "sleep:60" {
		t.Errorf("prompts in the session = %q", got)
	}

	n.rec.mu.Lock()
	for _, ex := range n.rec.exchanges {
		if ex.status == 404 || ex.status >= 500 {
			t.Errorf("the TUI's %s %s was answered %d: %s", ex.method, ex.path, ex.status, ex.body)
		}
	}
	n.rec.mu.Unlock()
	v := n.rec.check(t)
	t.Logf("the TUI made %d kinds of requests: %v", len(v.operations), sortedKeys(v.operations))
}

// clearInput empties the TUI's prompt.
func (u *tui) clearInput() {
	u.t.Helper()
	u.keys("Escape")
	time.Sleep(150 * time.Millisecond)
	u.keys("C-u")
	time.Sleep(150 * time.Millisecond)
}

// command types a slash command, picks it from the completion and runs
// it.
func (u *tui) command(name string) {
	u.t.Helper()
	u.clearInput()
	u.typeText(name)
	time.Sleep(700 * time.Millisecond)
	u.keys("Enter")
	// The completion either ran the command (the input changes: cleared,
	// or a reverted prompt put back) or filled the input with it, which
	// then takes another Enter. A loaded machine takes a while to show
	// which: a second Enter sent too early would send a prompt /undo
	// had put back.
	deadline := time.Now().Add(2 * time.Second)
	for strings.Contains(u.screen(), "┃  "+name) {
		if time.Now().After(deadline) {
			u.keys("Enter")
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestTUIEverydayFeatures drives what users do after chatting, in
// opencode's own TUI: a bash permission dialog that shows its command and
// then the output; /undo restoring the file and /redo bringing it back;
// the user's own !command; @ completion of a file; /fork; /init.
func TestTUIEverydayFeatures(t *testing.T) {
	n := startNode(t, "")
	file := filepath.Join(n.dir, "hello.txt")
	if err := os.MkdirAll(filepath.Join(n.dir, "guides"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(n.dir, "guides", "intro.md"), []byte("# intro\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	u := startTUI(t, n)
	u.waitFor("its prompt", "Ask anything")

	// bash asks (by default): the dialog shows the command; the output
	// shows once allowed.
	u.typeText(`tool:bash:{"command":"echo changed > hello.txt; echo OUT-$((6*7))"}`)
	u.keys("Enter")
	u.waitFor("the permission dialog with its command", "Permission required", "$ echo changed > hello.txt; echo OUT-$((6*7))")
	u.keys("Enter")
	u.waitFor("the command's output", "OUT-42")
	if b, _ := os.ReadFile(file); string(b) != "changed\n" {
		t.Fatalf("hello.txt = %q", b)
	}

	// /undo restores the file and puts the prompt back, and the file is
	// no longer among the session's modified files; /redo undoes it.
	u.waitFor("the modified file", "Modified Files", "hello.txt")
	u.command("/undo")
	u.waitFor("the revert", "message reverted")
	waitFile(t, file, "hello from the workspace\n")
	u.waitGone("the modified files after the undo", "Modified Files")
	u.command("/redo")
	waitFile(t, file, "changed\n")
	u.waitFor("the modified file after the redo", "Modified Files")

	// The user's own command.
	u.clearInput()
	u.typeText("!")
	time.Sleep(300 * time.Millisecond)
	u.typeText("echo SHELL-$((40+2))")
	u.keys("Enter")
	u.waitFor("the shell command's output", "SHELL-42")

	// @ completion offers the workspace's files, and its folders.
	u.clearInput()
	u.typeText("look at @hel")
	u.waitFor("the file completion", "hello.txt")
	u.clearInput()
	u.typeText("look at @guid")
	// Each item is a line of the list: the folder's own line ends at
	// its slash.
	u.waitFor("the folder completion", "┃ guides/ ", "┃ guides/intro.md")
	u.clearInput()

	// /init sends the model its instructions.
	u.command("/init")
	u.waitFor("the init prompt", "AGENTS.md")

	// /fork: a new session with this one's messages.
	sessions := len(n.sessions(t))
	u.command("/fork")
	u.waitFor("the fork dialog", "Fork session")
	u.keys("Enter")
	u.waitFor("the forked session", "(fork)")
	if got := len(n.sessions(t)); got != sessions+1 {
		t.Errorf("%d sessions after /fork, want %d", got, sessions+1)
	}

	n.rec.mu.Lock()
	for _, ex := range n.rec.exchanges {
		if ex.status == 404 || ex.status >= 500 {
			t.Errorf("the TUI's %s %s was answered %d: %s", ex.method, ex.path, ex.status, ex.body)
		}
	}
	n.rec.mu.Unlock()
	n.rec.check(t)
}

// waitFile waits until a file holds want.
func waitFile(t *testing.T, path, want string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		if string(b) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %q, want %q", path, b, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// git runs git in dir.
func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %s", args, out)
	}
}

// TestTUIDiff: /diff in opencode's TUI shows the work tree's changes
// (GET /vcs/diff): the changed files and their lines, and, switched to
// its other sources, the branch's changes since it left main and the
// last turn's; it crashed the TUI with "no route for GET /vcs/diff"
// before.
func TestTUIDiff(t *testing.T) {
	n := startNode(t, "")
	git(t, n.dir, "init", "-q")
	git(t, n.dir, "add", ".")
	git(t, n.dir, "commit", "-qm", "init")
	git(t, n.dir, "checkout", "-q", "-b", "feature")
	if err := os.WriteFile(filepath.Join(n.dir, "on-the-branch.txt"), []byte("committed on feature\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, n.dir, "add", ".")
	git(t, n.dir, "commit", "-qm", "feature")
	if err := os.WriteFile(filepath.Join(n.dir, "hello.txt"), []byte("hello from the workspace\nanother line, diffed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(n.dir, "brand-new.txt"), []byte("a new file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	u := startTUI(t, n)
	u.waitFor("its prompt", "Ask anything")
	u.command("/diff")
	u.waitFor("the diff of the work tree", "Diff working tree", "hello.txt", "another line, diffed", "brand-new.txt", "2 files")
	// Its other sources: since the branch left main (GET /vcs gives
	// the default branch), and the last turn.
	u.keys("d")
	u.waitFor("the sources", "Switch source", "Main branch")
	u.keys("Down")
	time.Sleep(200 * time.Millisecond)
	u.keys("Enter")
	u.waitFor("the branch's diff", "Diff main branch", "on-the-branch.txt", "committed on feature", "3 files")
	u.keys("d")
	u.waitFor("the sources", "Switch source", "Last turn")
	u.keys("Down")
	time.Sleep(200 * time.Millisecond)
	u.keys("Enter")
	u.waitFor("the last turn's diff", "Diff last turn")
	u.keys("Escape")

	n.rec.mu.Lock()
	for _, ex := range n.rec.exchanges {
		if ex.status == 404 || ex.status >= 500 {
			t.Errorf("the TUI's %s %s was answered %d: %s", ex.method, ex.path, ex.status, ex.body)
		}
	}
	n.rec.mu.Unlock()
	n.rec.check(t)
}

// TestTUIShowsEditsAndWrites: opencode's TUI shows an edit's diff and a
// write's content, from the tool parts' metadata (diff, filediff,
// diagnostics), as it does for opencode's own tools.
func TestTUIShowsEditsAndWrites(t *testing.T) {
	n := startNode(t, "")
	u := startTUI(t, n)
	u.waitFor("its prompt", "Ask anything")
	u.typeText(`tool:edit:{"filePath":"hello.txt","oldString":"hello from the workspace","newString":"edited by the model"}`)
	u.keys("Enter")
	// The diff's lines, numbered and marked (the prompt holds the bare
	// text too).
	u.waitFor("the edit's diff", "← Edit hello.txt", "1 - hello from the workspace", "1 + edited by the model")
	u.clearInput()
	u.typeText(`tool:write:{"filePath":"notes.md","content":"written line one\nwritten line two\n"}`)
	u.keys("Enter")
	u.waitFor("the write's content", "# Wrote notes.md", "2 written line two")
	n.rec.check(t)
}

// TestTUIEditAskShowsTheDiff: with edit set to ask, opencode's permission
// dialog shows the change the edit would make (the request's metadata:
// filepath and diff), and nothing is written before the answer.
func TestTUIEditAskShowsTheDiff(t *testing.T) {
	n := startNode(t, `,"permission":{"edit":"ask"}`)
	u := startTUI(t, n)
	u.waitFor("its prompt", "Ask anything")
	u.typeText(`tool:edit:{"filePath":"hello.txt","oldString":"hello from the workspace","newString":"asked before editing"}`)
	u.keys("Enter")
	u.waitFor("the dialog with the diff", "Permission required", "- hello from the workspace", "+ asked before editing")
	if b, _ := os.ReadFile(filepath.Join(n.dir, "hello.txt")); string(b) != "hello from the workspace\n" {
		t.Errorf("written before the answer: %q", b)
	}
	u.keys("Enter")
	waitFile(t, filepath.Join(n.dir, "hello.txt"), "asked before editing\n")
	n.rec.check(t)
}
