package opencode_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// serveOpencode starts `opencode serve` in dir (offline) and returns its
// URL; it stops with the test.
func serveOpencode(t *testing.T, dir string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, opencodeBin, "serve", "--port", "0", "--hostname", "127.0.0.1")
	cmd.Env, cmd.Dir = opencodeEnv(t.TempDir()), dir
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		close(found)
	}()
	select {
	case u, ok := <-found:
		if !ok {
			t.Fatal("opencode serve exited")
		}
		return u
	case <-time.After(60 * time.Second):
		t.Fatal("opencode serve did not start")
	}
	return ""
}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", u, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v %s", u, err, b)
	}
}

// matches reports whether every word of query is a subsequence of p, case
// ignored: what a fuzzy finder must find (opencode's also finds near
// misses, which its TUI's own ranking then drops).
func matches(p, query string) bool {
	p = strings.ToLower(p)
	for _, w := range strings.Fields(strings.ToLower(query)) {
		j := 0
		for i := 0; i < len(p) && j < len(w); i++ {
			if p[i] == w[j] {
				j++
			}
		}
		if j < len(w) {
			return false
		}
	}
	return true
}

// TestFindMatchesOpencode: on the same tree, GET /find/file answers what
// opencode serve answers: files and folders (folders unless dirs=false),
// hidden files in, what .gitignore ignores out, every match opencode
// finds found, the same best match; /api/fs/find (the TUI's @ completion)
// lists folders too.
func TestFindMatchesOpencode(t *testing.T) {
	n := startNode(t, "")
	for p, body := range map[string]string{".gitignore": "build/\n", "src/components/button/Button.tsx": "x\n",
		"src/components/index.ts": "x\n", "src/main.go": "x\n", "internal/server/server.go": "x\n",
		"internal/server/handlers.go": "x\n", "docs/README.md": "x\n", "README.md": "x\n", ".hidden/secret.txt": "x\n",
		"build/out.bin": "x\n", "node_modules/pkg/index.js": "x\n"} {
		os.MkdirAll(filepath.Dir(filepath.Join(n.dir, p)), 0o755)
		if err := os.WriteFile(filepath.Join(n.dir, p), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(t, n.dir, "init", "-q")
	git(t, n.dir, "add", ".gitignore", "src", "README.md")
	git(t, n.dir, "commit", "-qm", "init")
	oc := serveOpencode(t, n.dir)

	best := map[string]string{"hel": "hello.txt", "ser": "internal/server/server.go", "button": "src/components/button/Button.tsx",
		"read": "README.md", "idx": "src/components/index.ts", "docs": "docs/", "main": "src/main.go", "rdm": "README.md",
		"src main": "src/main.go", "srv": "internal/server/server.go"}
	queries := []string{"comp", "int", "secret", "env", "out", "src/"}
	for q := range best {
		queries = append(queries, q)
	}
	for _, q := range queries {
		args := url.Values{"directory": {n.dir}, "query": {q}, "limit": {"50"}}.Encode()
		var theirs, ours []string
		getJSON(t, oc+"/find/file?"+args, &theirs)
		getJSON(t, n.rec.URL()+"/find/file?"+args, &ours)
		for _, p := range theirs {
			if matches(p, q) && !slices.Contains(ours, p) {
				t.Errorf("%q: opencode finds %s, agentd does not: %v", q, p, ours)
			}
		}
		for _, p := range ours {
			if !matches(p, q) || strings.HasPrefix(p, "build/") || strings.HasPrefix(p, ".git/") {
				t.Errorf("%q: agentd answers %s", q, p)
			}
		}
		// opencode's order among close matches moves with the files'
		// state; its best is among agentd's first two.
		if want, ok := best[q]; ok && (len(ours) == 0 || ours[0] != want || len(theirs) == 0 || !slices.Contains(ours[:min(2, len(ours))], theirs[0])) {
			t.Errorf("%q: best match: agentd %v, opencode %v, want %s", q, ours, theirs, want)
		}
	}
	// dirs=false: files only, on both.
	args := url.Values{"directory": {n.dir}, "query": {"ser"}, "dirs": {"false"}}.Encode()
	var files []string
	getJSON(t, n.rec.URL()+"/find/file?"+args, &files)
	if len(files) == 0 || slices.ContainsFunc(files, func(p string) bool { return strings.HasSuffix(p, "/") }) {
		t.Errorf("dirs=false: %v", files)
	}
	// The TUI's call: folders in the answer.
	var found struct {
		Data []struct{ Path, Type string }
	}
	getJSON(t, n.rec.URL()+"/api/fs/find?"+url.Values{"location[directory]": {n.dir}, "query": {"comp"}, "limit": {"20"}}.Encode(), &found)
	if !slices.ContainsFunc(found.Data, func(e struct{ Path, Type string }) bool {
		return e.Path == "src/components/" && e.Type == "directory"
	}) {
		t.Errorf("/api/fs/find lists no folder: %+v", found.Data)
	}
	n.rec.check(t)
}
