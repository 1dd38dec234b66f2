package lockfile

import (
	"errors"
	"fmt"
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
	var held *HeldError
	if !errors.As(fmt.Errorf("open: %w", err), &held) || held.URL() != "http://127.0.0.1:4096" {
		t.Errorf("the holder's URL from %v: %+v", err, held)
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

// TestEveryPathMeetsTheLock: a symlink, a hard link and a /proc path to
// the same database meet the one lock, which names the holder.
func TestEveryPathMeetsTheLock(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "agentd.db")
	l, err := Acquire(db)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if err := l.Describe("http://127.0.0.1:4096"); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link.db")
	if err := os.Symlink(db, link); err != nil {
		t.Fatal(err)
	}
	hard := filepath.Join(dir, "hard.db")
	if err := os.Link(db, hard); err != nil {
		t.Fatal(err)
	}
	paths := []string{link, hard, "/proc/self/root" + db}
	if d, err := os.Open(dir); err == nil {
		paths = append(paths, "/proc/self/fd/"+strconv.Itoa(int(d.Fd()))+"/agentd.db")
		defer d.Close()
	}
	for _, p := range paths {
		_, err := Acquire(p)
		// Through a hard link the holder's description, beside the path
		// it opened, cannot be found: the lock still holds.
		if !errors.Is(err, ErrHeld) || p != hard && !strings.Contains(err.Error(), "127.0.0.1:4096") {
			t.Errorf("through %s: %v", p, err)
		}
	}
	if l.Path() != db {
		t.Errorf("path = %s, want %s", l.Path(), db)
	}
}

// TestCheckNoticesReplacement: deleting or replacing the file under the
// holder is noticed.
func TestCheckNoticesReplacement(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "agentd.db")
	l, err := Acquire(db)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if err := l.Check(); err != nil {
		t.Fatalf("fresh lock: %v", err)
	}
	if err := os.Rename(db, db+".old"); err != nil {
		t.Fatal(err)
	}
	if err := l.Check(); !errors.Is(err, ErrReplaced) {
		t.Errorf("after the file moved away: %v", err)
	}
	if err := os.WriteFile(db, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := l.Check(); !errors.Is(err, ErrReplaced) {
		t.Errorf("after another file took its place: %v", err)
	}
	// The new file is not locked: it is another database.
	l2, err := Acquire(db)
	if err != nil {
		t.Fatalf("the new file: %v", err)
	}
	l2.Release()
}

// TestWaitsForADeadServersReaper: a restart right after a kill -9 finds
// the lock held by the dead server's reaper (which keeps it until the
// server's tools are gone) and waits for it, where a live holder is
// refused at once.
func TestWaitsForADeadServersReaper(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agentd.db")
	held, err := Acquire(path)
	if err != nil {
		t.Fatal(err)
	}
	// The holder's description names a process that has exited.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".lock", []byte("agentd pid "+strconv.Itoa(gone.Process.Pid)+" serving http://127.0.0.1:1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	released := make(chan time.Time, 1)
	time.AfterFunc(300*time.Millisecond, func() {
		released <- time.Now()
		held.Release()
	})
	l, err := Acquire(path)
	if err != nil {
		t.Fatalf("a dead server's lock was not waited for: %v", err)
	}
	if time.Now().Before(<-released) {
		t.Error("acquired before the reaper let go")
	}
	l.Release()
}
