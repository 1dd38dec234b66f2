package builtin

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/safegit"
	"github.com/agentd/agentd/internal/sandbox"
	"github.com/agentd/agentd/internal/tool"
)

func gitIn(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main",
		"-c", "core.hooksPath=/dev/null"}, args...)...)
	cmd.Dir, cmd.Env = dir, safegit.Env()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v %s", args, err, out)
	}
}

// TestWorktreeCommitConfined: a confined command in a linked worktree can
// commit (git writes the worktree's folder, objects, refs and logs in the
// main repository's .git), but cannot change that repository's
// configuration; a .git file the model wrote to name another repository's
// worktree folder gets no grant.
func TestWorktreeCommitConfined(t *testing.T) {
	t.Parallel()
	s := confined(t, sandbox.Config{})
	if !safegit.Available() {
		t.Skip("git is not installed")
	}
	main := workspace(t)
	os.WriteFile(filepath.Join(main, "a.txt"), []byte("a\n"), 0o644)
	gitIn(t, main, "init", "-q")
	gitIn(t, main, "add", ".")
	gitIn(t, main, "commit", "-qm", "one")
	wt := filepath.Join(workspace(t), "wt")
	gitIn(t, main, "worktree", "add", "-q", "-b", "side", wt)
	call := tool.Call{Directory: wt, Sandbox: s, Scope: "worktree-test", ID: "w1"}
	res := bashCall(t.Context(), t, call, `echo b > b.txt && git add b.txt && git -c user.name=m -c user.email=m@m commit -qm two && git log --format=%s -1;
		echo '[core]' >> `+filepath.Join(main, ".git", "config")+` || echo CONFIG-REFUSED`)
	if !strings.Contains(res.Output, "two\n") {
		t.Errorf("git commit in the worktree failed: %s", res.Output)
	}
	if !strings.Contains(res.Output, "CONFIG-REFUSED") {
		t.Errorf("the command changed the repository's configuration: %s", res.Output)
	}
	// A workspace whose .git names a worktree folder that does not name
	// it back writes nothing there.
	forged := workspace(t)
	admin := filepath.Join(main, ".git", "worktrees", "wt")
	os.WriteFile(filepath.Join(forged, ".git"), []byte("gitdir: "+admin+"\n"), 0o644)
	call = tool.Call{Directory: forged, Sandbox: s, Scope: "worktree-test", ID: "w2"}
	res = bashCall(t.Context(), t, call, `touch `+filepath.Join(admin, "planted")+` || echo REFUSED`)
	if !strings.Contains(res.Output, "REFUSED") {
		t.Errorf("a forged .git file won a grant: %s", res.Output)
	}
}
