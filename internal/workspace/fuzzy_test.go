package workspace

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func paths(es []Entry) string {
	var out []string
	for _, e := range es {
		out = append(out, e.Path)
	}
	return strings.Join(out, ",")
}

// TestFilesRanking: files and folders together, the best match first: a
// file's name over a folder's name over the path; on a tie files before
// folders, shorter paths first; words separated by spaces each match;
// hidden entries are left out before the limit.
func TestFilesRanking(t *testing.T) {
	t.Parallel()
	dir := tree(t, map[string]string{"src/components/button/Button.tsx": "", "src/components/index.ts": "", "src/main.go": "",
		"internal/server/server.go": "", "internal/server/handlers.go": "", "docs/README.md": "", "README.md": "", "hello.txt": "",
		".hidden/secret.txt": ""})
	for _, c := range []struct{ query, typ, want string }{
		{"button", "", "src/components/button/Button.tsx,src/components/button/"},
		{"ser", TypeFile, "internal/server/server.go,.hidden/secret.txt,internal/server/handlers.go"},
		{"ser", TypeDir, "internal/server/"},
		{"docs", "", "docs/,docs/README.md"},
		{"rdm", TypeFile, "README.md,docs/README.md"},
		{"src main", "", "src/main.go"},
		{"HEL", "", "hello.txt"},
	} {
		got, err := Files(t.Context(), dir, c.query, c.typ, 50, nil)
		if err != nil {
			t.Fatal(err)
		}
		if p := paths(got); !strings.HasPrefix(p, c.want) {
			t.Errorf("%q (%s) = %s, want %s first", c.query, c.typ, p, c.want)
		}
	}
	hidden := func(rel string) bool { return strings.HasSuffix(rel, ".md") }
	if got, _ := Files(t.Context(), dir, "readme", TypeFile, 1, hidden); len(got) != 0 {
		t.Errorf("hidden entries listed: %v", got)
	}
	if got, _ := Files(t.Context(), dir, "", "", 3, nil); paths(got) != "README.md,hello.txt,src/main.go" {
		t.Errorf("empty query: %v", paths(got))
	}
}

// TestFilesFollowGit: in a repository the files are git's: tracked and
// untracked, the ignore rules honoured (an ignored tree costs nothing),
// node_modules in when not ignored, deleted files out; from a
// subdirectory, its files relative to it.
func TestFilesFollowGit(t *testing.T) {
	t.Parallel()
	dir, _ := repo(t, map[string]string{".gitignore": "build/\n", "src/app.go": "", "gone.go": "", "node_modules/pkg/index.js": ""})
	os.MkdirAll(filepath.Join(dir, "build"), 0o755)
	os.WriteFile(filepath.Join(dir, "build", "app.go.o"), nil, 0o644)
	os.WriteFile(filepath.Join(dir, "src", "new.go"), nil, 0o644)
	os.Remove(filepath.Join(dir, "gone.go"))
	got, err := Files(t.Context(), dir, "go", TypeFile, 50, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := paths(got); !strings.Contains(p, "src/app.go") || !strings.Contains(p, "src/new.go") || strings.Contains(p, "gone.go") ||
		strings.Contains(p, "build") {
		t.Errorf("files = %s", p)
	}
	if got, _ := Files(t.Context(), dir, "index", "", 50, nil); paths(got) != "node_modules/pkg/index.js" {
		t.Errorf("node_modules (not ignored) = %s", paths(got))
	}
	if got, _ := Files(t.Context(), filepath.Join(dir, "src"), "", "", 50, nil); paths(got) != "app.go,new.go" {
		t.Errorf("from src = %s", paths(got))
	}
}

// BenchmarkFilesGit: one @ completion keystroke in a repository of 20,000
// files (git ls-files through a private git directory, ranking).
func BenchmarkFilesGit(b *testing.B) {
	if _, err := exec.LookPath("git"); err != nil {
		b.Skip("no git")
	}
	dir := b.TempDir()
	for i := range 20000 {
		p := filepath.Join(dir, "pkg"+strconv.Itoa(i%200), "sub"+strconv.Itoa(i%7), "file"+strconv.Itoa(i)+".go")
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, nil, 0o644)
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "."}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git %v: %s", args, out)
		}
	}
	for b.Loop() {
		if got, err := Files(b.Context(), dir, "pkg12 file123", "", 50, nil); err != nil || len(got) == 0 {
			b.Fatal(got, err)
		}
	}
}
