// Package lockfile makes one process the owner of a database file: an
// exclusive flock on a file beside it, which the kernel releases when the
// process dies (kill -9 included), so a crash never leaves a stale lock.
// The file says who holds it, so a second process can name the owner.
package lockfile

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
)

// ErrHeld is wrapped by Acquire when another process holds the lock.
var ErrHeld = errors.New("held by another process")

// Lock is a held lock.
type Lock struct {
	f    *os.File
	once sync.Once
}

// Acquire takes the lock at path (creating the file), or fails at once
// with an error wrapping ErrHeld that names the holder.
func Acquire(path string) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("take the database lock (is its directory writable?): %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		owner, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			who := strings.TrimSpace(string(owner))
			if who == "" {
				who = "another process"
			}
			return nil, fmt.Errorf("%s: %w: %s", path, ErrHeld, who)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	l := &Lock{f: f}
	if err := l.Describe(""); err != nil {
		l.Release()
		return nil, err
	}
	return l, nil
}

// Describe records who holds the lock: this process's id and, when known,
// the address it serves.
func (l *Lock) Describe(addr string) error {
	if l == nil {
		return nil
	}
	who := fmt.Sprintf("agentd pid %d", os.Getpid())
	if addr != "" {
		who += " serving " + addr
	}
	if err := l.f.Truncate(0); err != nil {
		return err
	}
	_, err := l.f.WriteAt([]byte(who+"\n"), 0)
	return err
}

// Release gives the lock up. It is idempotent.
func (l *Lock) Release() {
	if l == nil {
		return
	}
	l.once.Do(func() {
		_ = l.f.Truncate(0)
		_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
		_ = l.f.Close()
	})
}
