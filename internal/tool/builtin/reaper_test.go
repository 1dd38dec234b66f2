package builtin

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/lockfile"
)

// TestReaperHelper is the "server" of TestReaperOutlivesServer: it takes
// the database lock, starts the reaper and a tool that escaped its group,
// says so, and waits to be killed.
func TestReaperHelper(t *testing.T) {
	db, scope := os.Getenv("REAPER_HELPER_DB"), os.Getenv("REAPER_HELPER_SCOPE")
	if db == "" || scope == "" {
		return // only as the helper process
	}
	lock, err := lockfile.Acquire(db)
	if err != nil {
		os.Exit(3)
	}
	if _, err := StartReaper(scope, lock.File()); err != nil {
		os.Exit(4)
	}
	box := contain(scope, "c1")
	cmd := exec.Command("bash", "-c", "setsid sleep 600 >/dev/null 2>&1 < /dev/null & echo started")
	cmd.Env, cmd.SysProcAttr = box.env(nil), box.attr()
	out, err := cmd.Output()
	if err != nil {
		os.Exit(5) // the test reads no "started" line, and says so
	}
	os.Stdout.Write(out)
	time.Sleep(10 * time.Minute)
}

// TestReaperOutlivesServer: after kill -9 of the server, the tool process
// that left its group dies without waiting for a new server, and the
// database stays locked until it has (no new server starts tools while
// the old ones live).
func TestReaperOutlivesServer(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "agentd.db")
	// A scope of its own: the reaper of another run of this test on the
	// machine sweeps its own scope, not this one's.
	scope := fmt.Sprintf("reaper-scope-%d", time.Now().UnixNano())
	cmd := exec.Command(os.Args[0], "-test.run=^TestReaperHelper$")
	cmd.Env = append(os.Environ(), "REAPER_HELPER_DB="+db, "REAPER_HELPER_SCOPE="+scope)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// A failure below leaves no helper waiting ten minutes.
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.Contains(line, "started") {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper: %q %v", line, err)
	}
	if n := marked(scope + "/c1"); n != 1 {
		t.Fatalf("%d escaped tool processes before the kill, want 1", n)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for marked(scope+"/c1") != 0 {
		if ctx.Err() != nil {
			t.Fatal("the escaped tool outlived the server")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for {
		l, err := lockfile.Acquire(db)
		if err == nil {
			l.Release()
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the database stayed locked after the sweep: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if root := cgroupRoot(); root != "" {
		if _, err := os.Stat(filepath.Join(root, scope)); err == nil {
			t.Error("the scope's cgroup directory was left behind")
		}
	}
}
