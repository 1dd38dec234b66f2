package builtin

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

// marked counts the live processes carrying marker.
func marked(marker string) int {
	n := 0
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && strings.Contains(string(stat), ") Z ") {
			continue // a zombie is dead, only not reaped yet
		}
		if strings.Contains(string(env), markerVar+"="+marker+"\x00") {
			n++
		}
	}
	return n
}

func runCall(ctx context.Context, t *testing.T, ws, scope, id, command string) tool.Result {
	b, _ := json.Marshal(map[string]any{"command": command})
	res, err := Bash{}.Run(ctx, tool.Call{Directory: ws, Input: b, Scope: scope, ID: id})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestBashEscapedChildren: children that leave the process group do not
// hold the call and do not outlive it.
func TestBashEscapedChildren(t *testing.T) {
	t.Parallel()
	ws := workspace(t)
	for i, command := range []string{
		"sleep 12 & echo started",
		"setsid sleep 600 & echo started",
		"set -m; (sleep 600 &); echo started",
		"setsid sh -c 'setsid sleep 600 & sleep 600' & echo started",
	} {
		id := "call" + strconv.Itoa(i)
		start := time.Now()
		res := runCall(t.Context(), t, ws, "escape-test", id, command)
		if d := time.Since(start); d > 3*time.Second || !strings.Contains(res.Output, "started") {
			t.Errorf("%q: %v, %q", command, d, res.Output)
		}
		if n := marked("escape-test/" + id); n != 0 {
			t.Errorf("%q: %d processes outlived the call", command, n)
		}
	}
}

// TestBashAbortKillsEscapees: an abort ends a call whose children left the
// group and ignore SIGTERM, within a second, leaving nothing.
func TestBashAbortKillsEscapees(t *testing.T) {
	t.Parallel()
	ws := workspace(t)
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	res := runCall(ctx, t, ws, "abort-test", "c1", "trap '' TERM; setsid sh -c 'trap \"\" TERM; sleep 600' & sleep 600")
	if d := time.Since(start); d > 1300*time.Millisecond {
		t.Errorf("abort took %v", d)
	}
	if !res.IsError {
		t.Errorf("aborted call = %+v", res)
	}
	if n := marked("abort-test/c1"); n != 0 {
		t.Errorf("%d processes outlived the abort", n)
	}
}

// TestSweep: processes a dead agentd left (same scope) are killed at
// start-up; others are not.
func TestSweep(t *testing.T) {
	t.Parallel()
	start := func(marker string) *exec.Cmd {
		cmd := exec.Command("sleep", "600")
		cmd.Env = append(os.Environ(), markerVar+"="+marker)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	left := start("sweep-scope/x")
	other := start("other-scope/x")
	defer other.Process.Kill()
	if n := Sweep("sweep-scope"); n != 1 {
		t.Errorf("swept %d, want 1", n)
	}
	if err := left.Wait(); err == nil {
		t.Error("the leftover process was not killed")
	}
	if marked("other-scope/x") != 1 {
		t.Error("another database's process was killed")
	}
	other.Process.Kill()
	other.Wait()
}
