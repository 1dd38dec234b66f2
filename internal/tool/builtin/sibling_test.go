package builtin

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/tool"
)

// Containment is by path components, not by string prefix: a directory
// beside the workspace whose name starts with the workspace's (ws-evil
// beside ws) is outside it.

// siblings makes a workspace ws and, beside it, ws-evil (holding
// secret.txt) and ws2; it returns the workspace and ws-evil.
func siblings(t *testing.T) (ws, evil string) {
	t.Helper()
	root := workspace(t)
	ws, evil = filepath.Join(root, "ws"), filepath.Join(root, "ws-evil")
	for _, d := range []string{ws, evil, filepath.Join(root, "ws2")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(evil, "secret.txt"), []byte("secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return ws, evil
}

func TestWithinIsByComponent(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		root, path string
		want       bool
	}{
		{"/a/ws", "/a/ws", true},
		{"/a/ws", "/a/ws/x", true},
		{"/a/ws", "/a/ws/x/y", true},
		{"/a/ws", "/a/ws-evil", false},
		{"/a/ws", "/a/ws-evil/x", false},
		{"/a/ws", "/a/ws2", false},
		{"/a/ws", "/a/wsx/y", false},
		{"/a/ws", "/a/w", false},
		{"/a/ws", "/a", false},
		{"/a/ws", "/", false},
		{"/", "/", true},
		{"/", "/etc", true},
	} {
		if got := Within(c.root, c.path); got != c.want {
			t.Errorf("Within(%q, %q) = %v, want %v", c.root, c.path, got, c.want)
		}
	}
}

// TestResolveRefusesSiblingPrefix: every way of naming a file in ws-evil
// from workspace ws resolves outside it.
func TestResolveRefusesSiblingPrefix(t *testing.T) {
	t.Parallel()
	ws, evil := siblings(t)
	if err := os.Symlink(evil, filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		"../ws-evil/secret.txt", evil + "/secret.txt", evil, "../ws-evil", "../ws-evil/new/file",
		"../ws2/x", "link/secret.txt", "link", ws + "-evil/secret.txt",
	} {
		if _, err := Resolve(ws, p); !errors.Is(err, ErrOutside) {
			t.Errorf("Resolve(%q) from %s: %v, want ErrOutside", p, ws, err)
		}
	}
	if got, err := Resolve(ws, "../ws/inside.txt"); err != nil || got != filepath.Join(ws, "inside.txt") {
		t.Errorf("Resolve(../ws/inside.txt) = %q, %v", got, err)
	}
}

// TestToolsRefuseSiblingPrefix: the file tools neither read nor write in
// ws-evil from workspace ws without the external_directory permission,
// and their permission needs ask for it.
func TestToolsRefuseSiblingPrefix(t *testing.T) {
	t.Parallel()
	ws, evil := siblings(t)
	secret := filepath.Join(evil, "secret.txt")
	for _, c := range []struct {
		tl    tool.Tool
		input map[string]any
	}{
		{Read{}, map[string]any{"filePath": secret}},
		{Read{}, map[string]any{"filePath": "../ws-evil/secret.txt"}},
		{Write{}, map[string]any{"filePath": filepath.Join(evil, "planted.txt"), "content": "x"}},
		{Write{}, map[string]any{"filePath": "../ws-evil/secret.txt", "content": "overwritten"}},
		{Edit{}, map[string]any{"filePath": secret, "oldString": "secret", "newString": "changed"}},
		{List{}, map[string]any{"path": evil}},
		{Glob{}, map[string]any{"pattern": "*", "path": "../ws-evil"}},
		{Grep{}, map[string]any{"pattern": "secret", "path": evil}},
		{Bash{}, map[string]any{"command": "cat secret.txt", "workdir": evil}},
	} {
		res := run(t, c.tl, ws, c.input)
		if !res.IsError || !strings.Contains(res.Output, "outside the workspace") || strings.Contains(res.Output, "secret\n") {
			t.Errorf("%s %v from %s = %v %q, want a refusal", c.tl.Name(), c.input, ws, res.IsError, res.Output)
		}
		if p, ok := c.tl.(tool.Permissioned); ok && c.tl.Name() != "bash" {
			b, _ := json.Marshal(c.input)
			if !asksExternal(p.Needs(tool.Call{Directory: ws, Input: b}), evil) {
				t.Errorf("%s %v: needs %+v, want external_directory for %s", c.tl.Name(), c.input, p.Needs(tool.Call{Directory: ws, Input: b}), evil)
			}
		}
	}
	if b, _ := os.ReadFile(secret); string(b) != "secret\n" {
		t.Errorf("ws-evil/secret.txt is now %q", b)
	}
	if _, err := os.Stat(filepath.Join(evil, "planted.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file was written in ws-evil: %v", err)
	}
	// Granted, the same read goes through: the refusal was the boundary's.
	b, _ := json.Marshal(map[string]any{"filePath": secret})
	res, err := Read{}.Run(t.Context(), tool.Call{Directory: ws, Input: b, AllowExternal: true})
	if err != nil || res.IsError || !strings.Contains(res.Output, "secret") {
		t.Errorf("read with external_directory granted = %+v, %v", res, err)
	}
}

// TestReadDirsRefuseSiblingPrefix: a directory read-only tools may read
// without asking does not open its sibling with a longer name.
func TestReadDirsRefuseSiblingPrefix(t *testing.T) {
	t.Parallel()
	ws, evil := siblings(t)
	out := strings.TrimSuffix(evil, "-evil") + "-out"
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(out, "kept.txt"), []byte("kept\n"), 0o644)
	// ReadDirs names ws-ev: ws-evil shares its prefix.
	call := func(p string) tool.Call {
		b, _ := json.Marshal(map[string]any{"filePath": p})
		return tool.Call{Directory: ws, Input: b, ReadDirs: []string{out, strings.TrimSuffix(evil, "il")}}
	}
	res, err := Read{}.Run(t.Context(), call(filepath.Join(evil, "secret.txt")))
	if err != nil || !res.IsError || strings.Contains(res.Output, "secret\n") {
		t.Errorf("read in ws-evil with ReadDirs ws-ev = %+v, %v", res, err)
	}
	if !asksExternal(Read{}.Needs(call(filepath.Join(evil, "secret.txt"))), evil) {
		t.Error("a read in ws-evil with ReadDirs ws-ev asks no external_directory")
	}
	res, err = Read{}.Run(t.Context(), call(filepath.Join(out, "kept.txt")))
	if err != nil || res.IsError || !strings.Contains(res.Output, "kept") {
		t.Errorf("read in a ReadDir = %+v, %v", res, err)
	}
}

// asksExternal reports whether needs ask external_directory for dir.
func asksExternal(needs []tool.Need, dir string) bool {
	for _, n := range needs {
		if n.Permission == "external_directory" && len(n.Patterns) > 0 && Within(dir, n.Patterns[0]) {
			return true
		}
	}
	return false
}
