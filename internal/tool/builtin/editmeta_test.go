package builtin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/tool"
)

// TestEditAndWriteMetadata: an edit reports opencode's diff, filediff
// {file, patch, additions, deletions} and diagnostics; a created file's
// diff adds its lines; a write reports diagnostics, filepath and exists
// (opencode's TUI shows a write's content once diagnostics are there); a
// whole-file rewrite's patch is bounded, its counts exact.
func TestEditAndWriteMetadata(t *testing.T) {
	t.Parallel()
	ws := workspace(t)
	abs := filepath.Join(ws, "a.txt")
	os.WriteFile(abs, []byte("one\r\ntwo\r\nthree\r\n"), 0o644)
	res := run(t, Edit{}, ws, map[string]any{"filePath": "a.txt", "oldString": "two", "newString": "TWO"})
	if res.IsError {
		t.Fatal(res.Output)
	}
	diff, _ := res.Metadata["diff"].(string)
	if !strings.HasPrefix(diff, "Index: "+abs+"\n") || !strings.Contains(diff, "@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n") {
		t.Errorf("diff = %q", diff)
	}
	fd, _ := res.Metadata["filediff"].(map[string]any)
	if fd["file"] != abs || fd["patch"] != diff || fd["additions"] != 1 || fd["deletions"] != 1 {
		t.Errorf("filediff = %v", fd)
	}
	if d, ok := res.Metadata["diagnostics"].(map[string]any); !ok || len(d) != 0 {
		t.Errorf("diagnostics = %v", res.Metadata["diagnostics"])
	}

	res = run(t, Edit{}, ws, map[string]any{"filePath": "new.txt", "oldString": "", "newString": "x\ny\n"})
	created, _ := res.Metadata["diff"].(string)
	if fd, _ := res.Metadata["filediff"].(map[string]any); fd["additions"] != 2 || fd["deletions"] != 0 ||
		!strings.Contains(created, "@@ -0,0 +1,2 @@\n+x\n+y\n") {
		t.Errorf("created: %v", res.Metadata)
	}

	res = run(t, Write{}, ws, map[string]any{"filePath": "a.txt", "content": "w\n"})
	if d, ok := res.Metadata["diagnostics"].(map[string]any); !ok || len(d) != 0 || res.Metadata["filepath"] != abs || res.Metadata["exists"] != true {
		t.Errorf("write metadata = %v", res.Metadata)
	}

	var big strings.Builder
	for range 20000 {
		big.WriteString("a line of the old file\n")
	}
	os.WriteFile(abs, []byte(big.String()), 0o644)
	res = run(t, Edit{}, ws, map[string]any{"filePath": "a.txt", "oldString": "a line", "newString": "the line", "replaceAll": true})
	fd, _ = res.Metadata["filediff"].(map[string]any)
	if d, _ := res.Metadata["diff"].(string); len(d) > maxDiffBytes || fd["additions"] != 20000 || fd["deletions"] != 20000 {
		t.Errorf("rewrite: %d bytes of diff, %v/%v", len(d), fd["additions"], fd["deletions"])
	}
}

// TestEditAskShowsTheDiff: the edit need of an edit or a write carries,
// when it asks, the file's path and the diff the call would make (what
// opencode's ask dialog shows); an edit that would fail has no diff.
func TestEditAskShowsTheDiff(t *testing.T) {
	t.Parallel()
	ws := workspace(t)
	abs := filepath.Join(ws, "a.txt")
	os.WriteFile(abs, []byte("one\ntwo\n"), 0o644)
	detail := func(tl interface {
		Needs(tool.Call) []tool.Need
	}, input string) map[string]any {
		t.Helper()
		for _, n := range tl.Needs(tool.Call{Directory: ws, Input: []byte(input)}) {
			if n.Permission == "edit" && n.Detail != nil {
				return n.Detail()
			}
		}
		t.Fatalf("no edit need with a detail for %s", input)
		return nil
	}
	md := detail(Edit{}, `{"filePath":"a.txt","oldString":"two","newString":"TWO"}`)
	if d, _ := md["diff"].(string); md["filepath"] != abs || !strings.Contains(d, "-two\n+TWO\n") {
		t.Errorf("edit: %v", md)
	}
	md = detail(Write{}, `{"filePath":"new.txt","content":"fresh\n"}`)
	if d, _ := md["diff"].(string); !strings.Contains(d, "@@ -0,0 +1,1 @@\n+fresh\n") {
		t.Errorf("write: %v", md)
	}
	if md := detail(Edit{}, `{"filePath":"a.txt","oldString":"absent","newString":"x"}`); md["diff"] != nil || md["filepath"] != abs {
		t.Errorf("a failing edit: %v", md)
	}
	if b, _ := os.ReadFile(abs); string(b) != "one\ntwo\n" {
		t.Errorf("the detail changed the file: %q", b)
	}
}
