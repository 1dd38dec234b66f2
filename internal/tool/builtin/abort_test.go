package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/tool"
)

// abortScript starts, beside its own shell, a background child, a child
// that ignores SIGTERM, a child in a session of its own (setsid: out of
// the call's process group) and a child that notes the SIGTERM it gets,
// writing each one's pid; then it waits in the foreground.
const abortScript = `echo $$ > shell.pid
sleep 600 & echo $! > background.pid
(trap '' TERM; sleep 600) & echo $! > stubborn.pid
setsid sh -c 'echo $$ > setsid.pid; exec sleep 600' &
(trap 'echo term > got-term; exit 0' TERM; echo $BASHPID > graceful.pid; while :; do sleep 0.05; done) &
sleep 600`

// TestBashAbortEndsEveryProcess: aborting a bash call ends all of its
// processes — the shell, its background children, one that ignores
// SIGTERM and one that left the process group with setsid — and the group
// gets SIGTERM before SIGKILL, so a process that handles it can clean up.
func TestBashAbortEndsEveryProcess(t *testing.T) {
	t.Parallel()
	ws := workspace(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan tool.Result, 1)
	go func() {
		b, _ := json.Marshal(map[string]any{"command": abortScript})
		res, err := Bash{}.Run(ctx, tool.Call{ID: fmt.Sprintf("abort-%d", time.Now().UnixNano()), Directory: ws, Input: b})
		if err != nil {
			t.Errorf("bash: %v", err)
		}
		done <- res
	}()
	names := []string{"shell.pid", "background.pid", "stubborn.pid", "setsid.pid", "graceful.pid"}
	pids := waitPIDs(t, ws, names...)
	t.Cleanup(func() {
		for _, pid := range pids {
			if alive(pid) {
				_ = syscall.Kill(pid, syscall.SIGKILL) // a survivor of a failed test
			}
		}
	})
	for i, pid := range pids {
		if !alive(pid) {
			t.Fatalf("%s (%d) is not running before the abort", names[i], pid)
		}
	}
	cancel()
	var res tool.Result
	select {
	case res = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the aborted call never returned")
	}
	if !res.IsError || !strings.Contains(res.Output, "aborted") {
		t.Errorf("aborted result = %+v", res)
	}
	// The kernel may take a moment to reap what was killed; without the
	// kill these would run for ten minutes.
	deadline := time.Now().Add(10 * time.Second)
	for i, pid := range pids {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if alive(pid) {
			t.Errorf("%s (%d) survived the abort", strings.TrimSuffix(names[i], ".pid"), pid)
		}
	}
	if b, err := os.ReadFile(filepath.Join(ws, "got-term")); err != nil || strings.TrimSpace(string(b)) != "term" {
		t.Errorf("the group got no SIGTERM before the kill: %q, %v", b, err)
	}
}
