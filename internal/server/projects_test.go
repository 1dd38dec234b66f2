package server_test

import (
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/safegit"
	"github.com/agentd/agentd/internal/safegit/safegittest"
	"github.com/agentd/agentd/internal/server"
	gitwt "github.com/agentd/agentd/internal/worktree"
)

// gitRepo makes dir a git repository with one commit of its files (git
// skips the test where it is not installed).
func gitRepo(t *testing.T, dir string) {
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

// commitAll commits the files of the repository at dir.
func commitAll(t *testing.T, dir string) {
	t.Helper()
	for _, args := range [][]string{{"add", "-A"}, {"commit", "-qm", "more"}} {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "core.hooksPath=/dev/null"}, args...)...)
		cmd.Dir, cmd.Env = dir, safegit.Env()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
}

// projectNode starts a node on a repository (real path) with a worktree
// folder of its own.
func projectNode(t *testing.T) (*app.App, string, string) {
	t.Helper()
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a\n"), 0o644)
	gitRepo(t, dir)
	wtDir, _ := filepath.EvalSymlinks(t.TempDir())
	a, err := app.Start(t.Context(), app.Config{DBPath: filepath.Join(t.TempDir(), "a.db"), Host: "127.0.0.1", Version: "test",
		Directory: dir, Security: server.Security{LoopbackOnly: true}, Logger: slog.New(slog.DiscardHandler),
		WorktreeDir: wtDir, SkillDirs: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Stop(t.Context()) })
	return a, dir, wtDir
}

type projectDir struct {
	Directory string `json:"directory"`
	Strategy  string `json:"strategy"`
}

// TestProjectCopies: the TUI's /move: the project's directories load, a
// copy is made (in agentd's worktree folder, whatever the client asked),
// listed with its strategy, refused removal while dirty unless forced,
// and gone once removed.
func TestProjectCopies(t *testing.T) {
	t.Parallel()
	a, dir, wtDir := projectNode(t)
	base := a.URL()
	if r := call(t, "POST", base+"/experimental/project/global/copy/refresh", "", nil); r.status != 204 {
		t.Fatalf("refresh: %d %s", r.status, r.body)
	}
	dirs := func() []projectDir {
		r := call(t, "GET", base+"/project/global/directories", "", nil)
		var out []projectDir
		if err := json.Unmarshal(r.body, &out); err != nil || r.status != 200 {
			t.Fatalf("directories: %d %s", r.status, r.body)
		}
		return out
	}
	if got := dirs(); len(got) != 1 || got[0] != (projectDir{Directory: dir}) {
		t.Errorf("directories = %+v, want the repository alone", got)
	}
	r := call(t, "POST", base+"/experimental/project/global/copy?location[directory]="+dir,
		`{"strategy":"git_worktree","directory":"/somewhere/else","name":"try it"}`, nil)
	var made struct{ Directory string }
	if json.Unmarshal(r.body, &made); r.status != 200 || !strings.HasPrefix(made.Directory, wtDir+"/") || filepath.Base(made.Directory) != "try-it" {
		t.Fatalf("copy: %d %s", r.status, r.body)
	}
	if b, _ := os.ReadFile(filepath.Join(made.Directory, "a.txt")); string(b) != "a\n" {
		t.Errorf("the copy's a.txt = %q", b)
	}
	if got := dirs(); len(got) != 2 || got[1] != (projectDir{Directory: made.Directory, Strategy: "git_worktree"}) {
		t.Errorf("directories = %+v", got)
	}
	os.WriteFile(filepath.Join(made.Directory, "new.txt"), []byte("x"), 0o644)
	body := `{"directory":"` + made.Directory + `","force":false}`
	r = call(t, "DELETE", base+"/experimental/project/global/copy", body, nil)
	var e struct {
		Name string
		Data struct {
			Message       string
			ForceRequired bool
		}
	}
	if json.Unmarshal(r.body, &e); r.status != 400 || e.Name != "ProjectCopyError" || !e.Data.ForceRequired {
		t.Errorf("removing a dirty copy: %d %s", r.status, r.body)
	}
	r = call(t, "DELETE", base+"/experimental/project/global/copy", strings.Replace(body, "false", "true", 1), nil)
	if r.status != 204 {
		t.Fatalf("forced removal: %d %s", r.status, r.body)
	}
	if _, err := os.Stat(made.Directory); !os.IsNotExist(err) {
		t.Errorf("the copy is still there: %v", err)
	}
	if r := call(t, "DELETE", base+"/experimental/project/global/copy", `{"directory":"`+dir+`","force":true}`, nil); r.status != 400 {
		t.Errorf("removing the repository itself: %d %s", r.status, r.body)
	}
	if _, err := os.Stat(filepath.Join(dir, "a.txt")); err != nil {
		t.Errorf("the repository was touched: %v", err)
	}
	if r := call(t, "POST", base+"/experimental/project/global/copy", `{"strategy":"rsync","directory":"/x"}`, nil); r.status != 400 {
		t.Errorf("an unknown strategy: %d %s", r.status, r.body)
	}
}

// TestWorktreeSession: a session made in a worktree works there (its
// files, its snapshots and revert); the worktree cannot be removed while
// the session runs, and can once it is idle; and none of the commands
// the repository's configuration and attributes name runs.
func TestWorktreeSession(t *testing.T) {
	tr := safegittest.New(t)
	tr.WriteSide(t)
	t.Setenv(safegittest.SecretVar, "sk-secret")
	a, dir, _ := projectNode(t)
	base := a.URL()
	os.WriteFile(filepath.Join(dir, ".gitattributes"), []byte(tr.Attributes()), 0o644)
	commitAll(t, dir)
	f, _ := os.OpenFile(filepath.Join(dir, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(tr.Config())
	f.Close()
	t.Cleanup(func() { tr.Check(t) })
	r := call(t, "POST", base+"/experimental/worktree", `{"name":"side"}`, nil)
	var wt gitwt.Worktree
	if json.Unmarshal(r.body, &wt); r.status != 200 || wt.Branch != "agentd/side" {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", base+"/experimental/worktree", "", nil); !strings.Contains(string(r.body), wt.Directory) {
		t.Errorf("list: %s", r.body)
	}
	r = call(t, "POST", base+"/session?directory="+wt.Directory, `{}`, nil)
	var sess struct{ ID, Directory string }
	json.Unmarshal(r.body, &sess)
	if sess.Directory != wt.Directory {
		t.Fatalf("session: %d %s", r.status, r.body)
	}
	write := `tool:write:{"filePath":"b.txt","content":"from the worktree\n"}` + "\nreply:done"
	b, _ := json.Marshal(write)
	if r := call(t, "POST", base+"/session/"+sess.ID+"/message", `{"parts":[{"type":"text","text":`+string(b)+`}]}`, nil); r.status != 200 {
		t.Fatalf("prompt: %d %s", r.status, r.body)
	}
	if got, _ := os.ReadFile(filepath.Join(wt.Directory, "b.txt")); string(got) != "from the worktree\n" {
		t.Errorf("the worktree's b.txt = %q", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "b.txt")); !os.IsNotExist(err) {
		t.Errorf("the session wrote in the main worktree: %v", err)
	}
	// Revert restores the worktree from the session's snapshot.
	msgs := call(t, "GET", base+"/session/"+sess.ID+"/message", "", nil)
	var list []struct{ Info struct{ ID string } }
	json.Unmarshal(msgs.body, &list)
	if r := call(t, "POST", base+"/session/"+sess.ID+"/revert", `{"messageID":"`+list[0].Info.ID+`"}`, nil); r.status != 200 {
		t.Fatalf("revert: %d %s", r.status, r.body)
	}
	if _, err := os.Stat(filepath.Join(wt.Directory, "b.txt")); !os.IsNotExist(err) {
		t.Errorf("revert left b.txt: %v", err)
	}
	// A run waiting for a permission keeps the worktree.
	ask, _ := json.Marshal(`tool:bash:{"command":"echo hi"}` + "\nreply:ok")
	if r := call(t, "POST", base+"/session/"+sess.ID+"/prompt_async", `{"parts":[{"type":"text","text":`+string(ask)+`}]}`, nil); r.status != 204 {
		t.Fatalf("prompt: %d %s", r.status, r.body)
	}
	rm := `{"directory":"` + wt.Directory + `"}`
	if r := call(t, "DELETE", base+"/experimental/worktree", rm, nil); r.status != 400 || !strings.Contains(string(r.body), sess.ID) {
		t.Errorf("removal under a busy session: %d %s", r.status, r.body)
	}
	if r := call(t, "POST", base+"/session/"+sess.ID+"/abort", "", nil); r.status != 200 {
		t.Fatalf("abort: %d %s", r.status, r.body)
	}
	call(t, "POST", base+"/session/"+sess.ID+"/wait?timeout=20s", "", nil)
	if r := call(t, "DELETE", base+"/experimental/worktree", rm, nil); r.status != 200 {
		t.Fatalf("removal: %d %s", r.status, r.body)
	}
	if _, err := os.Stat(wt.Directory); !os.IsNotExist(err) {
		t.Errorf("the worktree is still there: %v", err)
	}
}

// TestMoveSession: the TUI's /move of an existing session: an idle
// session moves to a worktree of its repository and its next run works
// there; a directory of another project, a busy session and changes to
// carry are refused.
func TestMoveSession(t *testing.T) {
	t.Parallel()
	a, dir, _ := projectNode(t)
	base := a.URL()
	r := call(t, "POST", base+"/experimental/worktree", `{"name":"dest"}`, nil)
	var wt gitwt.Worktree
	if json.Unmarshal(r.body, &wt); r.status != 200 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	r = call(t, "POST", base+"/session", `{}`, nil)
	var sess struct{ ID, Directory string }
	json.Unmarshal(r.body, &sess)
	before, _ := json.Marshal(`tool:write:{"filePath":"a.txt","content":"before the move\n"}` + "\nreply:done")
	if r := call(t, "POST", base+"/session/"+sess.ID+"/message", `{"parts":[{"type":"text","text":`+string(before)+`}]}`, nil); r.status != 200 {
		t.Fatalf("prompt: %d %s", r.status, r.body)
	}
	// Committed, so that the main worktree is clean to leave.
	git := exec.Command("git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "core.hooksPath=/dev/null", "commit", "-qam", "x")
	git.Dir, git.Env = dir, safegit.Env()
	if out, err := git.CombinedOutput(); err != nil {
		t.Fatalf("commit: %v %s", err, out)
	}
	move := func(dest string, changes bool) resp {
		b, _ := json.Marshal(map[string]any{"sessionID": sess.ID, "destination": map[string]string{"directory": dest}, "moveChanges": changes})
		return call(t, "POST", base+"/experimental/control-plane/move-session", string(b), nil)
	}
	if r := move(t.TempDir(), false); r.status != 400 || !strings.Contains(string(r.body), "MoveSessionError") {
		t.Errorf("a move to another project: %d %s", r.status, r.body)
	}
	os.WriteFile(filepath.Join(dir, "dirty.txt"), []byte("x"), 0o644)
	if r := move(wt.Directory, true); r.status != 400 || !strings.Contains(string(r.body), "commit them") {
		t.Errorf("a move carrying changes: %d %s", r.status, r.body)
	}
	if r := move(wt.Directory, false); r.status != 204 {
		t.Fatalf("move: %d %s", r.status, r.body)
	}
	r = call(t, "GET", base+"/session/"+sess.ID, "", nil)
	if json.Unmarshal(r.body, &sess); sess.Directory != wt.Directory {
		t.Errorf("the session's directory after the move: %s", r.body)
	}
	b, _ := json.Marshal(`tool:write:{"filePath":"moved.txt","content":"here\n"}` + "\nreply:done")
	if r := call(t, "POST", base+"/session/"+sess.ID+"/message", `{"parts":[{"type":"text","text":`+string(b)+`}]}`, nil); r.status != 200 {
		t.Fatalf("prompt: %d %s", r.status, r.body)
	}
	if _, err := os.Stat(filepath.Join(wt.Directory, "moved.txt")); err != nil {
		t.Errorf("the moved session did not work in the worktree: %v", err)
	}
	// A revert to a message from before the move restores the directory
	// the session works in now, never the one it left.
	msgs := call(t, "GET", base+"/session/"+sess.ID+"/message", "", nil)
	var list []struct{ Info struct{ ID string } }
	json.Unmarshal(msgs.body, &list)
	if r := call(t, "POST", base+"/session/"+sess.ID+"/revert", `{"messageID":"`+list[0].Info.ID+`"}`, nil); r.status != 200 {
		t.Fatalf("revert across the move: %d %s", r.status, r.body)
	}
	if _, err := os.Stat(filepath.Join(wt.Directory, "moved.txt")); !os.IsNotExist(err) {
		t.Errorf("the revert left the file written after the move: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "before the move\n" {
		t.Errorf("the revert changed the directory the session left: a.txt = %q", b)
	}
	call(t, "POST", base+"/session/"+sess.ID+"/unrevert", "", nil)
	ask, _ := json.Marshal(`tool:bash:{"command":"echo hi"}` + "\nreply:ok")
	call(t, "POST", base+"/session/"+sess.ID+"/prompt_async", `{"parts":[{"type":"text","text":`+string(ask)+`}]}`, nil)
	if r := move(dir, false); r.status != 400 || !strings.Contains(string(r.body), "running") {
		t.Errorf("a move of a busy session: %d %s", r.status, r.body)
	}
	call(t, "POST", base+"/session/"+sess.ID+"/abort", "", nil)
}
