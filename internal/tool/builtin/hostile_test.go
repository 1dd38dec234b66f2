package builtin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/tool"
)

// TestSpecialFilesRefused: read, edit and write refuse FIFOs and devices
// at once instead of blocking on them or reading forever.
func TestSpecialFilesRefused(t *testing.T) {
	t.Parallel()
	ws := workspace(t)
	fifo := filepath.Join(ws, "pipe")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(ws, "zero")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tl    tool.Tool
		input map[string]any
	}{
		{Read{}, map[string]any{"filePath": "pipe"}},
		{Edit{}, map[string]any{"filePath": "pipe", "oldString": "a", "newString": "b"}},
		{Write{}, map[string]any{"filePath": "pipe", "content": "x"}},
		{Read{}, map[string]any{"filePath": "/dev/zero"}},
		{Read{}, map[string]any{"filePath": "zero"}},
	} {
		done := make(chan string, 1)
		go func() { done <- runExternal(t, c.tl, ws, c.input).Output }()
		select {
		case out := <-done:
			if !strings.Contains(out, "not a regular file") {
				t.Errorf("%s %v: %q", c.tl.Name(), c.input, out)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s %v blocked", c.tl.Name(), c.input)
		}
	}
}

// runExternal runs a tool with external paths allowed (the operator said
// yes), to show that even then special files are refused.
func runExternal(t *testing.T, tl tool.Tool, ws string, input any) tool.Result {
	b, _ := json.Marshal(input)
	res, err := tl.Run(context.Background(), tool.Call{Directory: ws, Input: b, AllowExternal: true})
	if err != nil {
		t.Errorf("%s: infrastructure error %v", tl.Name(), err)
	}
	return res
}

// TestSymlinkSwapRace swaps a path between a file in the workspace and a
// symlink to a secret outside it while read and write use it: nothing
// outside is ever read or written.
func TestSymlinkSwapRace(t *testing.T) {
	t.Parallel()
	ws := workspace(t)
	outside := workspace(t)
	secret := filepath.Join(outside, "secret.txt")
	os.WriteFile(secret, []byte("TOP-SECRET\n"), 0o644)
	// The directory d flips between a real directory (so the path checks
	// out as inside) and a symlink out (so a later open would follow it).
	d, parked := filepath.Join(ws, "d"), filepath.Join(ws, "parked")
	os.MkdirAll(d, 0o755)
	os.WriteFile(filepath.Join(d, "secret.txt"), []byte("harmless\n"), 0o644)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				os.Remove(d)
				os.Rename(parked, d)
				return
			default:
			}
			os.Rename(d, parked)
			os.Symlink(outside, d)
			os.Remove(d)
			os.Rename(parked, d)
		}
	})
	var leaks, writes atomic.Int64
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		res := run(t, Read{}, ws, map[string]any{"filePath": "d/secret.txt"})
		if strings.Contains(res.Output, "TOP-SECRET") {
			leaks.Add(1)
		}
		run(t, Write{}, ws, map[string]any{"filePath": "d/written.txt", "content": "x"})
		if _, err := os.Stat(filepath.Join(outside, "written.txt")); err == nil {
			writes.Add(1)
			os.Remove(filepath.Join(outside, "written.txt"))
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d reads and %d writes escaped", leaks.Load(), writes.Load())
	if leaks.Load() > 0 || writes.Load() > 0 {
		t.Errorf("through the swapped symlink: %d reads and %d writes outside the workspace", leaks.Load(), writes.Load())
	}
}

// TestGrepDoesNotFollowFileSymlinksOut: the pure-Go grep skips a symlink
// to a file outside the workspace.
func TestGrepDoesNotFollowFileSymlinksOut(t *testing.T) {
	t.Parallel()
	ws := workspace(t)
	outside := workspace(t)
	os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("TOP-SECRET\n"), 0o644)
	os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(ws, "link.txt"))
	os.WriteFile(filepath.Join(ws, "own.txt"), []byte("TOP-SECRET-LOOKALIKE\n"), 0o644)
	res := run(t, Grep{NoRipgrep: true}, ws, map[string]any{"pattern": "TOP-SECRET"})
	if strings.Contains(res.Output, "link.txt") || !strings.Contains(res.Output, "own.txt") {
		t.Errorf("grep = %q", res.Output)
	}
}
