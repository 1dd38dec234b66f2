package server_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/engine"
)

// TestVcsRoutesFollowTheRules: /vcs/status, /vcs/diff and /vcs/diff/raw
// leave out what the operator's rules deny to read (by name or through a
// link), and /vcs/apply refuses a patch naming a file the rules deny to
// edit, before writing anything; an allowed patch is applied.
func TestVcsRoutesFollowTheRules(t *testing.T) {
	t.Parallel()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for p, body := range map[string]string{"prod.env": "TOKEN=old\n", "notes.txt": "one\n", "locked/conf.txt": "c\n"} {
		os.MkdirAll(filepath.Dir(filepath.Join(ws, p)), 0o755)
		os.WriteFile(filepath.Join(ws, p), []byte(body), 0o644)
	}
	gitRepo(t, ws)
	os.WriteFile(filepath.Join(ws, "prod.env"), []byte("TOKEN=leaked-new\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("two\n"), 0o644)
	os.Symlink("prod.env", filepath.Join(ws, "link.txt"))
	a, err := app.Start(t.Context(), app.Config{
		DBPath: filepath.Join(t.TempDir(), "a.db"), Host: "127.0.0.1", Version: "test", Directory: ws,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Engine: engine.Config{Permission: []core.Rule{
			{Permission: "read", Pattern: "*.env", Action: core.ActionDeny},
			{Permission: "edit", Pattern: "locked/*", Action: core.ActionDeny}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Stop(t.Context()) })
	q := "?directory=" + url.QueryEscape(ws)
	for _, route := range []string{"/vcs/status", "/vcs/diff" + q + "&mode=git", "/vcs/diff/raw"} {
		if !strings.Contains(route, "?") {
			route += q
		}
		r := call(t, "GET", a.URL()+route, "", nil)
		body := string(r.body)
		if r.status != 200 || strings.Contains(body, "leaked") || strings.Contains(body, "prod.env") || strings.Contains(body, "link.txt") ||
			!strings.Contains(body, "notes.txt") {
			t.Errorf("%s: %d %s", route, r.status, body)
		}
	}
	var diffs []struct {
		File, Patch, Status  string
		Additions, Deletions int
	}
	r := call(t, "GET", a.URL()+"/vcs/diff"+q+"&mode=git&context=0", "", nil)
	if err := json.Unmarshal(r.body, &diffs); err != nil || len(diffs) != 1 || diffs[0].Additions != 1 || diffs[0].Deletions != 1 {
		t.Errorf("diff = %s", r.body)
	}
	if r := call(t, "GET", a.URL()+"/vcs/diff"+q+"&mode=nope", "", nil); r.status != 400 {
		t.Errorf("a bad mode: %d", r.status)
	}

	apply := func(patch string) resp {
		b, _ := json.Marshal(map[string]string{"patch": patch})
		return call(t, "POST", a.URL()+"/vcs/apply"+q, string(b), nil)
	}
	locked := "diff --git a/locked/conf.txt b/locked/conf.txt\n--- a/locked/conf.txt\n+++ b/locked/conf.txt\n@@ -1 +1 @@\n-c\n+x\n"
	notes := "diff --git a/notes.txt b/notes.txt\n--- a/notes.txt\n+++ b/notes.txt\n@@ -1 +1 @@\n-two\n+three\n"
	if r := apply(notes + locked); r.status != 403 {
		t.Errorf("a patch naming a file the rules deny to edit: %d %s", r.status, r.body)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "notes.txt")); string(b) != "two\n" {
		t.Errorf("notes.txt = %q after a refused patch", b)
	}
	if r := apply(notes); r.status != 200 || !strings.Contains(string(r.body), `"applied":true`) {
		t.Errorf("apply: %d %s", r.status, r.body)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "notes.txt")); string(b) != "three\n" {
		t.Errorf("notes.txt = %q", b)
	}
	var e struct {
		Name string
		Data struct{ Message, Reason string }
	}
	if r := apply(notes); r.status != 400 || json.Unmarshal(r.body, &e) != nil || e.Name != "VcsApplyError" || e.Data.Reason != "not-clean" {
		t.Errorf("a patch that no longer applies: %d %s", r.status, r.body)
	}
}
