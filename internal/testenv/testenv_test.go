package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestGoTestNamesWhatItSkipped runs go test on two packages that skip for
// want of PostgreSQL: go test's output holds exactly one line naming it
// and how to provide it.
func TestGoTestNamesWhatItSkipped(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test")
	}
	cmd := exec.Command("go", "test", "-count=1", "../store/postgres/", "../store/postgres/pgtest/", "../store/storetest/")
	cmd.Env = append(os.Environ(), "AGENTD_TEST_POSTGRES=", "GOFLAGS=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test: %v\n%s", err, out)
	}
	if n := strings.Count(string(out), "agentd: tests skipped for want of"); n != 1 {
		t.Errorf("%d summary lines, want 1:\n%s", n, out)
	}
	if !strings.Contains(string(out), "PostgreSQL: set AGENTD_TEST_POSTGRES") {
		t.Errorf("the line does not say how to run the PostgreSQL tests:\n%s", out)
	}
}

// TestGoTestNamesWhatItSkippedInAFile: with go test's output in a file
// (go test > log 2>&1), the line is there once go test has ended, whole,
// after go's own lines; and at once when the file is appended to (>>).
func TestGoTestNamesWhatItSkippedInAFile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test")
	}
	for _, flag := range []int{os.O_TRUNC, os.O_APPEND} {
		log := filepath.Join(t.TempDir(), "log")
		f, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|flag, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("go", "test", "-count=1", "../store/postgres/", "../store/postgres/pgtest/", "../store/storetest/")
		cmd.Env = append(os.Environ(), "AGENTD_TEST_POSTGRES=", "GOFLAGS=")
		cmd.Stdout, cmd.Stderr = f, f
		err = cmd.Run()
		f.Close()
		if err != nil {
			out, _ := os.ReadFile(log)
			t.Fatalf("go test: %v\n%s", err, out)
		}
		// The line is appended by a process that waits for go to end.
		var out []byte
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if out, _ = os.ReadFile(log); strings.Contains(string(out), "(go test -v lists each skip).\n") {
				break
			}
		}
		if n := strings.Count(string(out), "agentd: tests skipped for want of PostgreSQL: set AGENTD_TEST_POSTGRES"); n != 1 {
			t.Errorf("flag %#o: %d whole summary lines, want 1:\n%s", flag, n, out)
		}
		if !strings.Contains(string(out), "ok  \tgithub.com/agentd/agentd/internal/store/postgres") {
			t.Errorf("flag %#o: go's own lines are gone:\n%s", flag, out)
		}
	}
}
