package app

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStartEndsLeftoverTools pins that the sweep of the tool processes a
// previous process on this database left behind, which runs beside the
// rest of start-up, has ended them by the time Start returns (before
// recovery could resume a run): the leftover is dead or has SIGKILL
// pending the moment Start returns, with no waiting, even when the sweep
// is slower than everything else Start does. Not parallel: it slows the
// package's sweep down.
func TestStartEndsLeftoverTools(t *testing.T) {
	defer func(f func(string) int) { sweep = f }(sweep)
	slow := sweep
	sweep = func(scope string) int { time.Sleep(300 * time.Millisecond); return slow(scope) }
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "agentd.db")
	scope := toolScope(db, nodeDesc{id: "local", kind: "sqlite"})
	left := exec.Command("sleep", "600")
	left.Env = append(os.Environ(), "AGENTD_TOOL="+scope+"/call1")
	left.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := left.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = left.Process.Kill(); _ = left.Wait() }()
	a, err := Start(t.Context(), Config{DBPath: db, Host: "127.0.0.1", Version: "test", Directory: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop(context.Background())
	if !killed(t, left.Process.Pid) {
		t.Error("a tool process the previous process left was still alive, without SIGKILL pending, when Start returned")
	}
}

// killed reports whether pid is a zombie or has SIGKILL pending.
func killed(t *testing.T, pid int) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return true
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimSpace(v)
		switch k {
		case "State":
			if strings.HasPrefix(v, "Z") || strings.HasPrefix(v, "X") {
				return true
			}
		case "SigPnd", "ShdPnd":
			if n, err := strconv.ParseUint(v, 16, 64); err == nil && n&(1<<(uint(syscall.SIGKILL)-1)) != 0 {
				return true
			}
		}
	}
	return false
}
