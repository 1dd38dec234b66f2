package workspace

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, body := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestListAndRead(t *testing.T) {
	t.Parallel()
	dir := tree(t, map[string]string{"a.txt": "hello\n", "src/b.go": "package b\n", "bin.dat": "\x00\x01x", "node_modules/x.js": "x"})
	nodes, err := List(dir, ".", nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range nodes {
		got = append(got, n.Path+":"+n.Type)
	}
	if strings.Join(got, ",") != "node_modules/:directory,src/:directory,a.txt:file,bin.dat:file" || !nodes[0].Ignored {
		t.Errorf("list = %v", got)
	}
	if c, err := Read(dir, "a.txt", nil); err != nil || c.Type != "text" || c.Content != "hello" {
		t.Errorf("text = %+v %v", c, err)
	}
	if c, err := Read(dir, "bin.dat", nil); err != nil || c.Type != "binary" || c.Encoding != "base64" || c.Content != "AAF4" {
		t.Errorf("binary = %+v %v", c, err)
	}
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644)
	os.Symlink(outside, filepath.Join(dir, "link"))
	for _, p := range []string{"../x", "/etc/passwd", "link/secret"} {
		if _, err := Read(dir, p, nil); err == nil {
			t.Errorf("read %s outside the workspace", p)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err == nil {
		if _, err := Read(dir, "fifo", nil); err == nil {
			t.Error("read a FIFO")
		}
	}
}

func TestFiles(t *testing.T) {
	t.Parallel()
	dir := tree(t, map[string]string{"src/server/handlers.go": "", "src/server/hand.txt": "", "docs/readme.md": "", ".git/config": "", "node_modules/h.js": ""})
	got, err := Files(t.Context(), dir, "handgo", TypeFile, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Path != "src/server/handlers.go" {
		t.Errorf("fuzzy = %+v", got)
	}
	got, _ = Files(t.Context(), dir, "serv", TypeDir, 10, nil)
	if len(got) != 1 || got[0].Path != "src/server/" || got[0].Type != "directory" {
		t.Errorf("directories = %+v", got)
	}
	got, _ = Files(t.Context(), dir, "", "", 2, nil)
	if len(got) != 2 {
		t.Errorf("limit: %+v", got)
	}
	for _, e := range got {
		if strings.Contains(e.Path, ".git") || strings.Contains(e.Path, "node_modules") {
			t.Errorf("skipped folder listed: %s", e.Path)
		}
	}
}

func TestGrep(t *testing.T) {
	t.Parallel()
	dir := tree(t, map[string]string{"a.txt": "one\nhello world\n", "sub/b.txt": "say hello hello\n", ".git/x": "hello"})
	checkGrep(t, dir, "")
	if rg, err := exec.LookPath("rg"); err == nil {
		checkGrep(t, dir, rg)
	}
	if _, err := Grep(t.Context(), dir, "("); err == nil {
		t.Error("bad pattern accepted")
	}
}

func checkGrep(t *testing.T, dir, rg string) {
	t.Helper()
	got, err := grep(t.Context(), dir, "hel+o", rg)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("matches = %+v", got)
	}
	byPath := map[string]Match{}
	for _, m := range got {
		byPath[m.Path.Text] = m
	}
	if m := byPath["a.txt"]; m.LineNumber != 2 || m.AbsoluteOffset != 4 || m.Submatches[0].Start != 0 {
		t.Errorf("a.txt = %+v", m)
	}
	if m := byPath["sub/b.txt"]; len(m.Submatches) != 2 || m.Submatches[1].Start != 10 {
		t.Errorf("sub/b.txt (rg %q) = %+v", rg, m)
	}
}

func TestStatus(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir := tree(t, map[string]string{"a.txt": "1\n2\n", "gone.txt": "x\n"})
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
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("1\n3\n4\n"), 0o644)
	os.Remove(filepath.Join(dir, "gone.txt"))
	os.WriteFile(filepath.Join(dir, "new.txt"), []byte("a\nb\n"), 0o644)
	got, err := Status(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Change{"a.txt": {"a.txt", 2, 1, "modified"}, "gone.txt": {"gone.txt", 0, 1, "deleted"}, "new.txt": {"new.txt", 2, 0, "added"}}
	if len(got) != 3 {
		t.Fatalf("status = %+v", got)
	}
	for _, c := range got {
		if want[c.Path] != c {
			t.Errorf("%s = %+v, want %+v", c.Path, c, want[c.Path])
		}
	}
	if got, _ := Status(t.Context(), t.TempDir()); len(got) != 0 {
		t.Errorf("outside a repository: %+v", got)
	}
}

// TestHideSeesThroughLinks: Read asks hide about the file it really
// opened, and List about where an entry links, so a symlink to a hidden
// file is hidden too.
func TestHideSeesThroughLinks(t *testing.T) {
	t.Parallel()
	dir, err := filepath.EvalSymlinks(tree(t, map[string]string{"secret.env": "s", "ok.txt": "fine", "sub/deep.env": "d"}))
	if err != nil {
		t.Fatal(err)
	}
	os.Symlink("secret.env", filepath.Join(dir, "alias.txt"))
	os.Symlink("sub", filepath.Join(dir, "via"))
	var asked []string
	hide := func(rel string) bool {
		asked = append(asked, rel)
		return strings.HasSuffix(rel, ".env")
	}
	for _, p := range []string{"secret.env", "alias.txt", "via/deep.env", filepath.Join(dir, "alias.txt")} {
		if _, err := Read(dir, p, hide); !errors.Is(err, ErrDenied) {
			t.Errorf("read %s: %v, want ErrDenied", p, err)
		}
	}
	if c, err := Read(dir, "ok.txt", hide); err != nil || c.Content != "fine" {
		t.Errorf("read ok.txt: %+v %v", c, err)
	}
	nodes, err := List(dir, ".", hide)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	if strings.Join(names, ",") != "sub,ok.txt,via" {
		t.Errorf("list = %v", names)
	}
	if nodes, err := List(dir, "via", hide); err != nil || len(nodes) != 0 {
		t.Errorf("list via the link: %+v %v (asked %v)", nodes, err, asked)
	}
}
