package opencode_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/safegit"
)

// gitCommitAll makes dir a git repository holding its files.
func gitCommitAll(t *testing.T, dir string) {
	t.Helper()
	if !safegit.Available() {
		t.Skip("git is not installed")
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-qm", "one"}} {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main",
			"-c", "core.hooksPath=/dev/null"}, args...)...)
		cmd.Dir, cmd.Env = dir, safegit.Env()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
}

// TestTUISkillsAndMove drives /skills and /move in opencode's TUI: the
// skills dialog lists the project's skill and choosing it runs it; the
// model loads it with the skill tool; the move dialog lists the
// repository and its copies, moves the session into a copy (where it
// then works), and deletes another copy.
func TestTUISkillsAndMove(t *testing.T) {
	n := startNode(t, "")
	skill := "---\nname: greet\ndescription: Greets the user in the house style.\n---\nreply:GREETED-BY-THE-SKILL\n"
	if err := os.MkdirAll(filepath.Join(n.dir, ".opencode", "skill", "greet"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(n.dir, ".opencode", "skill", "greet", "SKILL.md"), []byte(skill), 0o644); err != nil {
		t.Fatal(err)
	}
	gitCommitAll(t, n.dir)
	u := startTUI(t, n)
	u.waitFor("its prompt", "Ask anything")

	// /skills lists the skill; choosing it puts /greet in the prompt,
	// which runs it.
	u.command("/skills")
	u.waitFor("the skills dialog", "Skills", "greet", "Greets the user in the house style.")
	u.keys("Enter")
	u.waitFor("the skill in the prompt", "/greet")
	time.Sleep(300 * time.Millisecond)
	u.keys("Enter")
	u.waitFor("the skill's answer", "GREETED-BY-THE-SKILL")
	sid := onlySession(t, n)

	// The model loads the skill with the skill tool.
	u.clearInput()
	u.typeText(`tool:skill:{"name":"greet"}`)
	u.keys("Enter")
	waitTranscript(t, n, sid, func(msgs []core.MessageWithParts) bool {
		for _, m := range msgs {
			for _, p := range m.Parts {
				if p.Type == core.PartTool && p.Tool == "skill" && strings.Contains(p.State.Output, "GREETED-BY-THE-SKILL") {
					return true
				}
			}
		}
		return false
	})

	// /move: the repository and its copies load; the session moves into
	// one and works there.
	var cp, doomed struct{ Directory string }
	n.call(t, "POST", "/experimental/project/global/copy?location[directory]="+n.dir,
		map[string]any{"strategy": "git_worktree", "directory": "/ignored", "name": "tui-copy"}, &cp)
	n.call(t, "POST", "/experimental/project/global/copy?location[directory]="+n.dir,
		map[string]any{"strategy": "git_worktree", "directory": "/ignored", "name": "tui-doomed"}, &doomed)
	if cp.Directory == "" || doomed.Directory == "" {
		t.Fatalf("copies: %q %q", cp.Directory, doomed.Directory)
	}
	u.command("/move")
	u.waitFor("the move dialog", "Move session", "tui-copy", "tui-doomed")
	if strings.Contains(u.screen(), "Could not load project directories") {
		t.Fatal("the move dialog could not load the project's directories")
	}
	u.typeText("tui-copy")
	time.Sleep(500 * time.Millisecond)
	u.keys("Enter")
	waitSessionDir(t, n, sid, cp.Directory)
	u.clearInput()
	u.typeText(`tool:write:{"filePath":"moved.txt","content":"written after the move\n"}`)
	u.keys("Enter")
	waitFile(t, filepath.Join(cp.Directory, "moved.txt"), "written after the move\n")

	// A copy is deleted from the dialog (ctrl+d twice).
	u.command("/move")
	u.waitFor("the move dialog", "Move session", "tui-doomed")
	u.typeText("tui-doomed")
	time.Sleep(500 * time.Millisecond)
	u.keys("C-d")
	u.waitFor("the confirmation", "again to confirm")
	u.keys("C-d")
	deadline := time.Now().Add(30 * time.Second)
	for _, err := os.Stat(doomed.Directory); err == nil; _, err = os.Stat(doomed.Directory) {
		if time.Now().After(deadline) {
			t.Fatalf("the deleted copy is still there")
		}
		time.Sleep(100 * time.Millisecond)
	}
	u.keys("Escape")

	n.rec.mu.Lock()
	for _, ex := range n.rec.exchanges {
		own := strings.Contains(ex.path, "/skill") || strings.Contains(ex.path, "/project") || strings.Contains(ex.path, "control-plane")
		if own && (ex.status == 404 || ex.status >= 500) {
			t.Errorf("the TUI's %s %s was answered %d: %s", ex.method, ex.path, ex.status, ex.body)
		}
	}
	n.rec.mu.Unlock()
	n.rec.check(t)
}

// onlySession is the id of the node's one session.
func onlySession(t *testing.T, n *node) string {
	t.Helper()
	list := n.sessions(t)
	if len(list) != 1 {
		t.Fatalf("%d sessions, want 1", len(list))
	}
	return list[0].ID
}

// waitTranscript waits until the session's messages satisfy ok.
func waitTranscript(t *testing.T, n *node, sid string, ok func([]core.MessageWithParts) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok(n.transcript(t, sid)) {
		if time.Now().After(deadline) {
			t.Fatalf("the transcript never showed what was waited for")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitSessionDir waits until the session works in dir.
func waitSessionDir(t *testing.T, n *node, sid, dir string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var s core.Session
		n.call(t, "GET", "/session/"+sid, nil, &s)
		if s.Directory == dir {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session works in %s, want %s", s.Directory, dir)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// judgeProjects makes TestSchema's requests of the skill, project, copy,
// worktree and move routes, successes and the errors clients read.
func judgeProjects(t *testing.T, n *node) {
	t.Helper()
	os.MkdirAll(filepath.Join(n.dir, ".opencode", "skill", "judged"), 0o755)
	os.WriteFile(filepath.Join(n.dir, ".opencode", "skill", "judged", "SKILL.md"), []byte("---\nname: judged\ndescription: Judged.\n---\nreply:judged\n"), 0o644)
	gitCommitAll(t, n.dir)
	expect := func(method, path string, body any, want int) {
		t.Helper()
		if code := n.call(t, method, path, body, nil); code != want {
			t.Errorf("%s %s: %d, want %d", method, path, code, want)
		}
	}
	for _, p := range []string{"/skill", "/project", "/experimental/worktree"} {
		expect("GET", p, nil, 200)
	}
	expect("PATCH", "/project/global", map[string]any{"name": "renamed"}, 400)
	expect("POST", "/project/git/init", nil, 200)
	expect("POST", "/experimental/project/global/copy/refresh", nil, 204)
	expect("POST", "/experimental/project/global/copy/generate-name", map[string]any{"context": "judge it"}, 200)
	var cp struct{ Directory string }
	n.call(t, "POST", "/experimental/project/global/copy", map[string]any{"strategy": "git_worktree", "directory": n.dir, "name": "judged"}, &cp)
	expect("POST", "/experimental/project/global/copy", map[string]any{"strategy": "rsync", "directory": n.dir}, 400)
	os.WriteFile(filepath.Join(cp.Directory, "dirty.txt"), []byte("x"), 0o644)
	expect("DELETE", "/experimental/project/global/copy", map[string]any{"directory": cp.Directory, "force": false}, 400)
	expect("DELETE", "/experimental/project/global/copy", map[string]any{"directory": cp.Directory, "force": true}, 204)
	var wt struct{ Directory string }
	n.call(t, "POST", "/experimental/worktree", map[string]any{"name": "judged"}, &wt)
	expect("POST", "/experimental/worktree/reset", map[string]any{"directory": wt.Directory}, 200)
	var s struct{ ID string }
	n.call(t, "POST", "/session", map[string]any{}, &s)
	move := func(dir string) map[string]any {
		return map[string]any{"sessionID": s.ID, "destination": map[string]string{"directory": dir}}
	}
	expect("POST", "/experimental/control-plane/move-session", move(wt.Directory), 204)
	expect("POST", "/experimental/control-plane/move-session", move(t.TempDir()), 400)
	expect("POST", "/experimental/control-plane/move-session", move(n.dir), 204)
	expect("DELETE", "/experimental/worktree", map[string]any{"directory": wt.Directory}, 200)
	expect("POST", "/experimental/worktree?directory="+t.TempDir(), map[string]any{}, 400)
}
