package server_test

import (
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/engine"
)

// TestFileRoutesReadRulesOnResolvedPaths: the file routes apply the
// operator's read rules to a path as it really is, relative to the
// directory and to the server's own: an absolute path, a symlink to a
// denied file, a path through a symlinked folder, or ?directory= inside
// a denied folder read nothing denied, and listings, searches and the
// git status leave denied files out.
func TestFileRoutesReadRulesOnResolvedPaths(t *testing.T) {
	t.Parallel()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for p, body := range map[string]string{"prod.env": "TOKEN=leaked-env\n", "secrets/key.pem": "leaked-key\n",
		"notes.txt": "leaked is a word in the notes\n"} {
		os.MkdirAll(filepath.Dir(filepath.Join(ws, p)), 0o755)
		if err := os.WriteFile(filepath.Join(ws, p), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink("prod.env", filepath.Join(ws, "link.txt"))
	os.Symlink("secrets", filepath.Join(ws, "linkdir"))
	if git, err := exec.LookPath("git"); err == nil {
		if out, err := exec.Command(git, "-C", ws, "init", "-q").CombinedOutput(); err != nil {
			t.Fatalf("git init: %v %s", err, out)
		}
	}
	a, err := app.Start(t.Context(), app.Config{
		DBPath: filepath.Join(t.TempDir(), "a.db"), Host: "127.0.0.1", Version: "test", Directory: ws,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Engine: engine.Config{Permission: []core.Rule{
			{Permission: "read", Pattern: "*.env", Action: core.ActionDeny},
			{Permission: "read", Pattern: "secrets/*", Action: core.ActionDeny},
			{Permission: "read", Pattern: "private", Action: core.ActionDeny}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Stop(t.Context()) })
	get := func(route string, q url.Values) resp {
		t.Helper()
		return call(t, "GET", a.URL()+route+"?"+q.Encode(), "", nil)
	}
	in := func(dir string, kv ...string) url.Values {
		q := url.Values{"directory": {dir}}
		for i := 0; i+1 < len(kv); i += 2 {
			q.Set(kv[i], kv[i+1])
		}
		return q
	}
	for _, q := range []url.Values{
		in(ws, "path", "prod.env"),
		in(ws, "path", filepath.Join(ws, "secrets", "key.pem")),
		in(ws, "path", "link.txt"),
		in(ws, "path", "linkdir/key.pem"),
		in(filepath.Join(ws, "secrets"), "path", "key.pem"),
		in(filepath.Join(ws, "linkdir"), "path", "key.pem"),
	} {
		if r := get("/file/content", q); r.status != 403 || strings.Contains(string(r.body), "leaked") {
			t.Errorf("/file/content %v: %d %s", q, r.status, r.body)
		}
	}
	if r := get("/file/content", in(ws, "path", "notes.txt")); r.status != 200 || !strings.Contains(string(r.body), "leaked is a word") {
		t.Errorf("an allowed file: %d %s", r.status, r.body)
	}
	for _, tc := range []struct {
		route string
		q     url.Values
	}{
		{"/find", in(ws, "pattern", "leaked")},
		{"/find", in(filepath.Join(ws, "secrets"), "pattern", "leaked")},
		{"/find/file", in(ws, "query", "e", "dirs", "true")},
		{"/find/file", in(filepath.Join(ws, "secrets"), "query", "k")},
		{"/file", in(ws, "path", "secrets")},
		{"/file", in(ws, "path", "linkdir")},
		{"/file", in(filepath.Join(ws, "secrets"), "path", ".")},
		{"/file", in(ws, "path", ".")},
		{"/file/status", in(ws)},
	} {
		r := get(tc.route, tc.q)
		body := string(r.body)
		if r.status != 200 || strings.Contains(body, "leaked-") || strings.Contains(body, "key.pem") ||
			strings.Contains(body, "prod.env") || strings.Contains(body, "link.txt") {
			t.Errorf("%s %v: %d %s", tc.route, tc.q, r.status, body)
		}
	}
	// A directory the rules deny is refused as a whole.
	os.Mkdir(filepath.Join(ws, "private"), 0o755)
	for _, route := range []string{"/find/file", "/file", "/find"} {
		if r := get(route, in(filepath.Join(ws, "private"), "query", "x", "pattern", "x", "path", ".")); r.status != 403 {
			t.Errorf("%s in a denied directory: %d %s", route, r.status, r.body)
		}
	}
	// What is allowed still shows.
	if r := get("/find", in(ws, "pattern", "leaked")); !strings.Contains(string(r.body), "notes.txt") {
		t.Errorf("/find lost the allowed match: %s", r.body)
	}
	if r := get("/file", in(ws, "path", ".")); !strings.Contains(string(r.body), "notes.txt") || !strings.Contains(string(r.body), "secrets/") {
		t.Errorf("/file lost the allowed entries: %s", r.body)
	}
}
