package lockfile

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestSecondHolderRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db.lock")
	l, err := Acquire(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Describe("http://127.0.0.1:4096"); err != nil {
		t.Fatal(err)
	}
	_, err = Acquire(path)
	if !errors.Is(err, ErrHeld) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) || !strings.Contains(err.Error(), "127.0.0.1:4096") {
		t.Fatalf("second acquire: %v", err)
	}
	l.Release()
	l.Release()
	l2, err := Acquire(path)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	l2.Release()
}

// TestDiesWithProcess: a lock held by a process that is killed is free.
func TestDiesWithProcess(t *testing.T) {
	if os.Getenv("LOCKFILE_HELPER") != "" {
		if _, err := Acquire(os.Getenv("LOCKFILE_HELPER")); err != nil {
			os.Exit(3)
		}
		os.Stdout.WriteString("held\n")
		time.Sleep(time.Minute)
		return
	}
	path := filepath.Join(t.TempDir(), "db.lock")
	cmd := exec.Command(os.Args[0], "-test.run=TestDiesWithProcess")
	cmd.Env = append(os.Environ(), "LOCKFILE_HELPER="+path)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := out.Read(buf); err != nil || string(buf) != "held\n" {
		t.Fatalf("helper: %q %v", buf, err)
	}
	if _, err := Acquire(path); !errors.Is(err, ErrHeld) {
		t.Fatalf("while the helper lives: %v", err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	l, err := Acquire(path)
	if err != nil {
		t.Fatalf("after kill -9 of the holder: %v", err)
	}
	l.Release()
}
