package server_test

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/server"
)

// TestFileRoutes: opencode's file and search routes answer in its shapes,
// over the request's directory, and never outside it.
func TestFileRoutes(t *testing.T) {
	t.Parallel()
	a := start(t, server.Security{LoopbackOnly: true})
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "src"), 0o755)
	os.WriteFile(filepath.Join(dir, "src", "main.go"), []byte("package main\nfunc main() {}\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("remember main\n"), 0o644)
	q := "directory=" + url.QueryEscape(dir)
	get := func(path string, out any) int {
		t.Helper()
		r := call(t, "GET", a.URL()+path, "", nil)
		if out != nil && r.status == 200 {
			if err := json.Unmarshal(r.body, out); err != nil {
				t.Fatalf("%s: %v %s", path, err, r.body)
			}
		}
		return r.status
	}
	var files []string
	if get("/find/file?query=mgo&"+q, &files); len(files) != 1 || files[0] != "src/main.go" {
		t.Errorf("find/file = %v", files)
	}
	var fsFind struct {
		Location struct{ Directory string }
		Data     []struct{ Path, Type string }
	}
	if get("/api/fs/find?query=src&type=directory&location%5Bdirectory%5D="+url.QueryEscape(dir), &fsFind); len(fsFind.Data) != 1 || fsFind.Data[0].Path != "src/" || fsFind.Location.Directory != dir {
		t.Errorf("api/fs/find = %+v", fsFind)
	}
	var matches []struct {
		Path       struct{ Text string }
		LineNumber int `json:"line_number"`
	}
	if get("/find?pattern=main&"+q, &matches); len(matches) != 3 {
		t.Errorf("find = %+v", matches)
	}
	var nodes []struct{ Name, Path, Type string }
	if get("/file?path=src&"+q, &nodes); len(nodes) != 1 || nodes[0].Path != "src/main.go" {
		t.Errorf("file = %+v", nodes)
	}
	var content struct{ Type, Content string }
	if get("/file/content?path=notes.txt&"+q, &content); content.Type != "text" || content.Content != "remember main" {
		t.Errorf("file/content = %+v", content)
	}
	var symbols []any
	if st := get("/find/symbol?query=main&"+q, &symbols); st != 200 || len(symbols) != 0 {
		t.Errorf("find/symbol = %d %v", st, symbols)
	}
	for _, p := range []string{"../../etc/passwd", "/etc/passwd"} {
		if st := get("/file/content?path="+url.QueryEscape(p)+"&"+q, nil); st != 403 {
			t.Errorf("file/content %s = %d, want 403", p, st)
		}
	}
	if st := get("/file?path=..&"+q, nil); st != 403 {
		t.Errorf("file ..: %d", st)
	}
	if st := get("/find/file?query=x&directory=/", nil); st != 400 {
		t.Errorf("find/file in /: %d", st)
	}
	if st := get("/file/content?path=missing.txt&"+q, nil); st != 404 {
		t.Errorf("missing file: %d", st)
	}
	if r := call(t, "GET", a.URL()+"/find?pattern=(&"+q, "", nil); r.status != 400 || !strings.Contains(string(r.body), "pattern") {
		t.Errorf("bad pattern: %d %s", r.status, r.body)
	}
}
