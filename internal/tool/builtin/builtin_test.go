package builtin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/internal/tool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func workspace(t *testing.T) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func run(t *testing.T, tl tool.Tool, ws string, input any) tool.Result {
	t.Helper()
	b, _ := json.Marshal(input)
	res, err := tl.Run(t.Context(), tool.Call{Directory: ws, Input: b})
	if err != nil {
		t.Fatalf("%s: infrastructure error %v", tl.Name(), err)
	}
	return res
}

func TestResolveConfinement(t *testing.T) {
	t.Parallel()
	ws := workspace(t)
	outside := workspace(t)
	os.MkdirAll(filepath.Join(ws, "sub"), 0o755)
	os.Symlink(outside, filepath.Join(ws, "escape"))
	os.Symlink(filepath.Join(outside, "nope", "deeper"), filepath.Join(ws, "dangling"))
	os.Symlink("sub", filepath.Join(ws, "inner"))
	for _, c := range []struct {
		p      string
		inside bool
	}{
		{"a.txt", true}, {"sub/../a.txt", true}, {"sub/new/dir/file", true}, {"inner/x", true}, {ws, true},
		{"../x", false}, {"sub/../../x", false}, {"/etc/passwd", false}, {"escape/file", false},
		{"escape", false}, {"dangling", false}, {"dangling/more", false}, {outside, false},
	} {
		_, err := Resolve(ws, c.p)
		if (err == nil) != c.inside {
			t.Errorf("Resolve(%q) err = %v, inside want %v", c.p, err, c.inside)
		}
	}
	if _, err := Resolve(ws, "a\x00b"); err == nil {
		t.Error("NUL byte accepted")
	}
}

// FuzzResolve: whatever the path, an accepted one is inside the workspace
// once every symlink is followed.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{"..", "../..", "/", "/etc/passwd", "a/../../b", "escape/x", "escape/../escape/y", "loop/x",
		"a\x00b", "\u2025/x", "\uff0e\uff0e/x", ".\u2024/x", "sub/./../..", "//x", "sub//..//..", "dangling/x", "~", "$HOME", "inner/../../x"} {
		f.Add(s)
	}
	root, _ := filepath.EvalSymlinks(f.TempDir())
	ws := filepath.Join(root, "ws")
	outside := filepath.Join(root, "outside")
	os.MkdirAll(filepath.Join(ws, "sub"), 0o755)
	os.MkdirAll(outside, 0o755)
	os.Symlink(outside, filepath.Join(ws, "escape"))
	os.Symlink(filepath.Join(outside, "x", "y"), filepath.Join(ws, "dangling"))
	os.Symlink("loop", filepath.Join(ws, "loop"))
	os.Symlink("sub", filepath.Join(ws, "inner"))
	f.Fuzz(func(t *testing.T, p string) {
		got, err := Resolve(ws, p)
		if err != nil {
			return
		}
		if !Within(ws, got) {
			t.Fatalf("Resolve(%q) = %q, outside %q", p, got, ws)
		}
		// Following the result again must not leave the workspace either.
		if real, err := realPath(got); err == nil && !Within(ws, real) {
			t.Fatalf("Resolve(%q) = %q really is %q", p, got, real)
		}
	})
}

func TestReadWriteEdit(t *testing.T) {
	t.Parallel()
	ws := workspace(t)
	res := run(t, Write{}, ws, map[string]any{"filePath": "dir/a.txt", "content": "one\ntwo\nthree\n"})
	if res.IsError {
		t.Fatalf("write: %s", res.Output)
	}
	entries, _ := os.ReadDir(filepath.Join(ws, "dir"))
	if len(entries) != 1 {
		t.Errorf("write left temp files: %v", entries)
	}
	res = run(t, Read{}, ws, map[string]any{"filePath": "dir/a.txt", "offset": 1, "limit": 1})
	if res.IsError || res.Output != "00002| two\n(file has 3 lines; read more with offset 2)\n" {
		t.Errorf("read = %q", res.Output)
	}
	res = run(t, Edit{}, ws, map[string]any{"filePath": "dir/a.txt", "oldString": "two", "newString": "TWO"})
	if res.IsError {
		t.Fatalf("edit: %s", res.Output)
	}
	b, _ := os.ReadFile(filepath.Join(ws, "dir/a.txt"))
	if string(b) != "one\nTWO\nthree\n" {
		t.Errorf("after edit: %q", b)
	}
	os.WriteFile(filepath.Join(ws, "dup.txt"), []byte("x x x"), 0o600)
	for _, c := range []struct {
		tool  tool.Tool
		input map[string]any
		want  string
	}{
		{Edit{}, map[string]any{"filePath": "dup.txt", "oldString": "x", "newString": "y"}, "occurs 3 times"},
		{Edit{}, map[string]any{"filePath": "dup.txt", "oldString": "zzz", "newString": "y"}, "not found"},
		{Edit{}, map[string]any{"filePath": "missing.txt", "oldString": "a", "newString": "b"}, "no such file"},
		{Read{}, map[string]any{"filePath": "missing.txt"}, "no such file"},
		{Read{}, map[string]any{"filePath": "../etc/passwd"}, "outside the workspace"},
		{Write{}, map[string]any{"filePath": "/tmp/agentd-escape.txt", "content": "x"}, "outside the workspace"},
		{Write{}, map[string]any{"filePath": "dir"}, "content is required"},
		{Read{}, map[string]any{"filePath": 5}, "invalid input"},
	} {
		res := run(t, c.tool, ws, c.input)
		if !res.IsError || !strings.Contains(res.Output, c.want) {
			t.Errorf("%s %v = %v %q, want an error containing %q", c.tool.Name(), c.input, res.IsError, res.Output, c.want)
		}
	}
	res = run(t, Edit{}, ws, map[string]any{"filePath": "dup.txt", "oldString": "x", "newString": "y", "replaceAll": true})
	if b, _ := os.ReadFile(filepath.Join(ws, "dup.txt")); res.IsError || string(b) != "y y y" {
		t.Errorf("replaceAll: %q %q", res.Output, b)
	}
	if st, _ := os.Stat(filepath.Join(ws, "dup.txt")); st.Mode().Perm() != 0o600 {
		t.Errorf("edit changed the mode to %v", st.Mode().Perm())
	}
	os.WriteFile(filepath.Join(ws, "bin"), []byte{0x7f, 'E', 'L', 'F', 0, 0, 1}, 0o644)
	if res := run(t, Read{}, ws, map[string]any{"filePath": "bin"}); !res.IsError || !strings.Contains(res.Output, "binary") {
		t.Errorf("binary read = %q", res.Output)
	}
	long := strings.Repeat("a", 5000)
	os.WriteFile(filepath.Join(ws, "long.txt"), []byte(long), 0o644)
	if res := run(t, Read{}, ws, map[string]any{"filePath": "long.txt"}); !strings.Contains(res.Output, "line cut") || len(res.Output) > 2100 {
		t.Errorf("long line not capped: %d bytes", len(res.Output))
	}
}

func TestGlobGrepList(t *testing.T) {
	t.Parallel()
	ws := workspace(t)
	for p, body := range map[string]string{"a.go": "package a\nfunc Hello() {}\n", "sub/b.go": "package b\n// hello world\n",
		"sub/deep/c.txt": "Hello again\n", ".git/config": "hello\n", "node_modules/x.js": "hello\n"} {
		os.MkdirAll(filepath.Dir(filepath.Join(ws, p)), 0o755)
		os.WriteFile(filepath.Join(ws, p), []byte(body), 0o644)
	}
	res := run(t, Glob{}, ws, map[string]any{"pattern": "**/*.go"})
	if res.Output != "a.go\nsub/b.go" {
		t.Errorf("glob = %q", res.Output)
	}
	res = run(t, Glob{}, ws, map[string]any{"pattern": "*.{txt,go}", "path": "sub/deep"})
	if res.Output != "sub/deep/c.txt" {
		t.Errorf("glob in path = %q", res.Output)
	}
	want := "a.go:2: func Hello() {}\nsub/deep/c.txt:1: Hello again\n"
	res = run(t, Grep{NoRipgrep: true}, ws, map[string]any{"pattern": "Hello"})
	if res.Output != want {
		t.Errorf("grep = %q", res.Output)
	}
	res = run(t, Grep{NoRipgrep: true}, ws, map[string]any{"pattern": "(?i)hello", "include": "*.go"})
	if res.Output != "a.go:2: func Hello() {}\nsub/b.go:2: // hello world\n" {
		t.Errorf("grep include = %q", res.Output)
	}
	if res := run(t, Grep{}, ws, map[string]any{"pattern": "("}); !res.IsError {
		t.Error("bad regexp accepted")
	}
	res = run(t, List{}, ws, map[string]any{})
	for _, want := range []string{"a.go", "sub/", "    b.go", "deep/"} {
		if !strings.Contains(res.Output, want) {
			t.Errorf("list lacks %q:\n%s", want, res.Output)
		}
	}
	if strings.Contains(res.Output, ".git") || strings.Contains(res.Output, "node_modules") {
		t.Errorf("list shows skipped directories:\n%s", res.Output)
	}
	if res := run(t, List{}, ws, map[string]any{"path": "/"}); !res.IsError {
		t.Error("list outside the workspace allowed")
	}
}

func TestBash(t *testing.T) {
	t.Parallel()
	ws := workspace(t)
	res := run(t, Bash{}, ws, map[string]any{"command": "pwd; echo err >&2"})
	if res.IsError || res.Output != ws+"\nerr\n" || res.Metadata["exit"] != 0 {
		t.Errorf("bash = %+v", res)
	}
	res = run(t, Bash{}, ws, map[string]any{"command": "echo out; exit 3"})
	if !res.IsError || res.Metadata["exit"] != 3 || !strings.Contains(res.Output, "exit status 3") {
		t.Errorf("non-zero exit = %+v", res)
	}
	res = run(t, Bash{}, ws, map[string]any{"command": "head -c 12000000 /dev/zero | tr '\\0' x"})
	if res.Metadata["truncated"] != true || len(res.Output) > bashOutputCap+100 {
		t.Errorf("output not capped: %d bytes", len(res.Output))
	}
	res = run(t, Bash{}, ws, map[string]any{"command": "sleep 5", "timeout": 100})
	if !res.IsError || res.Metadata["timeout"] != true {
		t.Errorf("timeout = %+v", res)
	}
	if res := run(t, Bash{}, ws, map[string]any{"command": "ls", "workdir": "/"}); !res.IsError {
		t.Error("workdir outside the workspace allowed")
	}
}

// TestBashAbortKillsGroup: cancelling the call ends the shell, a child that
// ignores SIGTERM and a grandchild, within a second.
func TestBashAbortKillsGroup(t *testing.T) {
	t.Parallel()
	ws := workspace(t)
	ctx, cancel := context.WithCancel(t.Context())
	cmd := `(trap '' TERM; sleep 600) & echo $! > stubborn.pid; (sleep 600 & echo $! > grandchild.pid; wait) & sleep 600`
	done := make(chan tool.Result, 1)
	go func() {
		b, _ := json.Marshal(map[string]any{"command": cmd})
		res, _ := Bash{}.Run(ctx, tool.Call{Directory: ws, Input: b})
		done <- res
	}()
	pids := waitPIDs(t, ws, "stubborn.pid", "grandchild.pid")
	start := time.Now()
	cancel()
	res := <-done
	if d := time.Since(start); d > time.Second {
		t.Errorf("abort took %v", d)
	}
	if !res.IsError || !strings.Contains(res.Output, "aborted") {
		t.Errorf("aborted result = %+v", res)
	}
	// Exiting takes the kernel a moment after the pipes close; every
	// process must be gone within a second of the abort.
	for _, pid := range pids {
		for alive(pid) && time.Since(start) < time.Second {
			time.Sleep(5 * time.Millisecond)
		}
		if alive(pid) {
			t.Errorf("process %d survived the abort", pid)
		}
	}
}

func waitPIDs(t *testing.T, dir string, names ...string) []int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var pids []int
	for _, n := range names {
		for {
			b, err := os.ReadFile(filepath.Join(dir, n))
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil {
				pids = append(pids, pid)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never appeared", n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return pids
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b))
	return len(fields) > 2 && fields[2] != "Z"
}
