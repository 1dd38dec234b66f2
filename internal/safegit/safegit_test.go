package safegit

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/safegit/safegittest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func needGit(t *testing.T) {
	t.Helper()
	if !Available() {
		t.Skip("git is not installed")
	}
}

// TestEnvIsAnAllowList: git gets none of the server's variables but PATH
// (and TMPDIR), whatever they are named.
func TestEnvIsAnAllowList(t *testing.T) {
	t.Setenv(safegittest.SecretVar, "sk-secret")
	t.Setenv("GIT_DIR", "/elsewhere")
	t.Setenv("GIT_CONFIG_PARAMETERS", "'core.fsmonitor'='x'")
	for _, kv := range Env() {
		name, _, _ := strings.Cut(kv, "=")
		if name == safegittest.SecretVar || kv == "GIT_DIR=/elsewhere" || name == "GIT_CONFIG_PARAMETERS" {
			t.Errorf("git's environment holds %s", kv)
		}
	}
	for _, want := range []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=/dev/null", "GIT_OPTIONAL_LOCKS=0"} {
		if !strings.Contains(strings.Join(Env(), "\n"), want) {
			t.Errorf("git's environment lacks %s", want)
		}
	}
}

func run(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v %s", args, err, out)
	}
	return string(out)
}

// TestProjectLinkedWorktree: a linked work tree (.git is a file naming
// its git directory, whose commondir holds objects and refs) reads as
// its own branch and index.
func TestProjectLinkedWorktree(t *testing.T) {
	t.Parallel()
	needGit(t)
	main := t.TempDir()
	os.WriteFile(filepath.Join(main, "f.txt"), []byte("1\n"), 0o644)
	run(t, main, "init", "-q")
	run(t, main, "add", ".")
	run(t, main, "commit", "-qm", "one")
	wt := filepath.Join(t.TempDir(), "wt")
	run(t, main, "worktree", "add", "-q", "-b", "side", wt)
	os.WriteFile(filepath.Join(wt, "f.txt"), []byte("2\n"), 0o644)
	r, err := Project(t.Context(), wt)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	out, err := Output(t.Context(), r.Cmd(wt, "status", "--porcelain=v1", "--branch"))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(out); !strings.HasPrefix(got, "## side") || !strings.Contains(got, " M f.txt") {
		t.Errorf("status of the linked work tree = %q", got)
	}
}

// TestProjectConfigHoldsOnlyValues: the configuration git reads for a
// project is agentd's: the project's values that decide how to read the
// repository are kept, its commands and includes are not, and Close
// leaves nothing behind.
func TestProjectConfigHoldsOnlyValues(t *testing.T) {
	t.Parallel()
	needGit(t)
	tr := safegittest.New(t)
	dir := t.TempDir()
	run(t, dir, "init", "-q")
	f, _ := os.OpenFile(filepath.Join(dir, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("[core]\n\tignorecase = true\n\tautocrlf = input\n" + tr.Config())
	f.Close()
	r, err := Project(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(r.shadow, "config"))
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{"ignorecase = true", "autocrlf = input", "bare = false"} {
		if !strings.Contains(got, want) {
			t.Errorf("config lacks %q:\n%s", want, got)
		}
	}
	for _, bad := range []string{tr.Script, "filter", "include", "fsmonitor", "hooks"} {
		if strings.Contains(got, bad) {
			t.Errorf("config holds %q:\n%s", bad, got)
		}
	}
	r.Close()
	if _, err := os.Stat(r.shadow); !os.IsNotExist(err) {
		t.Errorf("Close left %s: %v", r.shadow, err)
	}
	tr.Check(t)
}

func TestProjectOutsideARepository(t *testing.T) {
	t.Parallel()
	if _, err := Project(t.Context(), t.TempDir()); err != ErrNoRepo {
		t.Errorf("Project outside a repository: %v", err)
	}
}
