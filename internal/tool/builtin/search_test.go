package builtin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// greps are both searches: through ripgrep when it is installed, and the
// walker.
func greps(t *testing.T) map[string]Grep {
	out := map[string]Grep{"walker": {NoRipgrep: true}}
	if _, err := exec.LookPath("rg"); err == nil {
		out["ripgrep"] = Grep{}
	} else if os.Getenv("AGENTD_RIPGREP_REQUIRED") != "" {
		t.Fatal("rg is not installed")
	}
	return out
}

// TestGrepSearchesWholeLargeFiles: a match past the first 16 MB of a file
// is found (the walker read only that much, silently).
func TestGrepSearchesWholeLargeFiles(t *testing.T) {
	t.Parallel()
	ws := workspace(t)
	f, err := os.Create(filepath.Join(ws, "big.txt"))
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Repeat("filler ", 100) + "\n"
	for range (20 << 20) / len(line) {
		f.WriteString(line)
	}
	f.WriteString("needle at the end\n")
	f.Close()
	for name, g := range greps(t) {
		res := run(t, g, ws, map[string]any{"pattern": "needle"})
		if !strings.Contains(res.Output, "big.txt:") || !strings.Contains(res.Output, "needle at the end") {
			t.Errorf("%s: %q", name, res.Output)
		}
	}
}

// TestGrepStopsAndSays: a search with more matches than it keeps stops
// and says so; long lines are cut and counted.
func TestGrepStopsAndSays(t *testing.T) {
	t.Parallel()
	ws := workspace(t)
	var b strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&b, "match %d\n", i)
	}
	b.WriteString("match " + strings.Repeat("x", 100_000) + "\n")
	os.WriteFile(filepath.Join(ws, "many.txt"), []byte(b.String()), 0o644)
	os.WriteFile(filepath.Join(ws, "long.txt"), []byte("match "+strings.Repeat("y", 100_000)+"\n"), 0o644)
	for name, g := range greps(t) {
		res := run(t, g, ws, map[string]any{"pattern": "match"})
		if !strings.Contains(res.Output, "search stopped after 1000 matches") || res.Metadata["truncated"] != true {
			t.Errorf("%s: no stop note: %q", name, res.Output[max(0, len(res.Output)-300):])
		}
		if len(res.Output) > 200*600 {
			t.Errorf("%s: %d bytes of output", name, len(res.Output))
		}
		res = run(t, g, ws, map[string]any{"pattern": "match", "path": "long.txt"})
		if len(res.Output) > 2000 || !strings.Contains(res.Output, "long.txt:1:") {
			t.Errorf("%s: long line: %d bytes: %.200q", name, len(res.Output), res.Output)
		}
	}
}

// TestGrepRefusesSpecialFiles: a FIFO named as the path is refused at
// once (ripgrep would wait on it for a writer), and one inside the tree is
// skipped.
func TestGrepRefusesSpecialFiles(t *testing.T) {
	t.Parallel()
	ws := workspace(t)
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("hello\n"), 0o644)
	for name, g := range greps(t) {
		start := time.Now()
		res := run(t, g, ws, map[string]any{"pattern": "x", "path": "fifo"})
		if !res.IsError || !strings.Contains(res.Output, "not a directory or a regular file") {
			t.Errorf("%s: fifo as path: %+v", name, res)
		}
		res = run(t, g, ws, map[string]any{"pattern": "hello"})
		if !strings.Contains(res.Output, "a.txt:1: hello") {
			t.Errorf("%s: tree with a fifo: %q", name, res.Output)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%s: took %v", name, d)
		}
	}
}

func TestGlobStopsAndSays(t *testing.T) {
	t.Parallel()
	ws := workspace(t)
	for i := range 1200 {
		os.WriteFile(filepath.Join(ws, fmt.Sprintf("f%04d.txt", i)), nil, 0o644)
	}
	res := run(t, Glob{}, ws, map[string]any{"pattern": "*.txt"})
	if !strings.Contains(res.Output, "search stopped after 1000 matches") || !strings.Contains(res.Output, "900 more not shown") {
		t.Errorf("glob: %q", res.Output[max(0, len(res.Output)-200):])
	}
}
