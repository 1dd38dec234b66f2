package workspace

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/safegit/safegittest"
)

// TestStatusRunsNoProjectCode: /file/status reads a repository whose
// .git/config the model wrote (or a cloned repository shipped): a clean
// filter, a filter process, a textconv and a diff command, fsmonitor,
// hooks, a pager, an attributes file and an include, with .gitattributes
// and .git/info/attributes naming the drivers for every file. Status
// still answers, and runs none of them; the server's environment (a
// secret in this test's) reaches no git.
func TestStatusRunsNoProjectCode(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	t.Setenv(safegittest.SecretVar, "sk-secret")
	tr := safegittest.New(t)
	defer tr.Check(t)
	tr.WriteSide(t)
	dir := tree(t, map[string]string{"a.txt": "1\n2\n", "doc.md": "# x\n"})
	git := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %s", args, out)
		}
	}
	git("init", "-q")
	git("add", ".")
	git("commit", "-qm", "x")
	// Written the way the model's write tool would: appended to the
	// repository's configuration, and new attribute files.
	f, err := os.OpenFile(filepath.Join(dir, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(tr.Config())
	f.Close()
	os.WriteFile(filepath.Join(dir, ".gitattributes"), []byte(tr.Attributes()), 0o644)
	os.MkdirAll(filepath.Join(dir, ".git", "info"), 0o755)
	os.WriteFile(filepath.Join(dir, ".git", "info", "attributes"), []byte(tr.Attributes()), 0o644)
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("1\n3\n4\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "doc.md"), []byte("# y\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "new.txt"), []byte("n\n"), 0o644)
	for range 2 {
		got, err := Status(t.Context(), dir)
		if err != nil {
			t.Fatal(err)
		}
		var paths []string
		for _, c := range got {
			paths = append(paths, c.Path+":"+c.Status)
		}
		sort.Strings(paths)
		if s := strings.Join(paths, ","); s != ".gitattributes:added,a.txt:modified,doc.md:modified,new.txt:added" {
			t.Errorf("status = %s", s)
		}
	}
}
