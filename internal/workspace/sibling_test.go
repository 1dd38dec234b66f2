package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestSiblingPrefixIsOutside: a directory beside the workspace whose name
// starts with the workspace's (ws-evil beside ws) is outside it, named
// absolutely or relatively, for reads and listings; and a path inside that
// spells the workspace's own name back is inside.
func TestSiblingPrefixIsOutside(t *testing.T) {
	t.Parallel()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws, evil := filepath.Join(root, "ws"), filepath.Join(root, "ws-evil")
	for _, d := range []string{ws, evil} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(evil, "secret.txt"), []byte("secret\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "inside.txt"), []byte("inside\n"), 0o644)
	for _, p := range []string{evil + "/secret.txt", "../ws-evil/secret.txt", evil, "../ws-evil", ws + "-evil"} {
		if c, err := Read(ws, p, nil); !errors.Is(err, ErrOutside) {
			t.Errorf("Read(%q) from %s = %q, %v; want ErrOutside", p, ws, c.Content, err)
		}
		if nodes, err := List(ws, p, nil); !errors.Is(err, ErrOutside) {
			t.Errorf("List(%q) from %s = %v, %v; want ErrOutside", p, ws, nodes, err)
		}
	}
	for _, p := range []string{ws + "/inside.txt", "inside.txt", "./inside.txt"} {
		if c, err := Read(ws, p, nil); err != nil || c.Content != "inside" {
			t.Errorf("Read(%q) = %q, %v", p, c.Content, err)
		}
	}
}
