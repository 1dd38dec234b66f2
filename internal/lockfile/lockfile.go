// Package lockfile makes one process the owner of a database file: an
// exclusive flock on the database file itself, so that every path to it —
// a symlink, a hard link, a bind mount, /proc/…/cwd — meets the same lock,
// which the kernel releases when the process dies (kill -9 included), so
// a crash never leaves a stale lock. A file beside the database's real
// path says who holds it, so a second process can name the owner. The
// holder can check that its file is still the one at the path
// (Lock.Check): a database deleted or replaced under a running server
// would take its writes nowhere.
package lockfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrHeld is wrapped by Acquire when another process holds the lock.
var ErrHeld = errors.New("held by another process")

// HeldError is Acquire's error when another process holds the lock: it
// wraps ErrHeld and says who holds it.
type HeldError struct {
	// Path is the database's real path.
	Path string
	// Who is the holder's description: "agentd pid N serving URL".
	Who string
}

// Error names the database and its holder.
func (e *HeldError) Error() string { return fmt.Sprintf("%s: %v: %s", e.Path, ErrHeld, e.Who) }

// Unwrap makes errors.Is(err, ErrHeld) hold.
func (e *HeldError) Unwrap() error { return ErrHeld }

// URL is the address the holder serves, or "" when it named none (it is
// starting, or it is not a server).
func (e *HeldError) URL() string {
	_, addr, ok := strings.Cut(e.Who, " serving ")
	if !ok {
		return ""
	}
	return strings.TrimSpace(addr)
}

// ErrReplaced is wrapped by Check when the locked file is no longer the
// one at its path.
var ErrReplaced = errors.New("database file was deleted or replaced")

// Lock is a held lock.
type Lock struct {
	db   *os.File // the locked database file
	desc *os.File // who holds it, beside the database
	path string   // the database's real path
	dev  uint64
	ino  uint64
	once sync.Once
}

// reaperWait bounds how long Acquire waits for a dead server's reaper,
// which holds the lock until it has ended the server's tools.
var reaperWait = 30 * time.Second

// Acquire takes the lock on the database file at dbPath (creating an
// empty one, which SQLite treats as a new database), or fails with an
// error wrapping ErrHeld that names the holder. It fails at once while the
// server that took the lock lives; when that server is dead, the holder is
// its tool reaper finishing its sweep (a restart right after a kill -9),
// and Acquire waits for it.
func Acquire(dbPath string) (*Lock, error) {
	real, err := resolve(dbPath)
	if err != nil {
		return nil, fmt.Errorf("resolve database path %s: %w", dbPath, err)
	}
	db, err := os.OpenFile(real, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open database %s (is its directory writable?): %w", real, err)
	}
	descPath := real + ".lock"
	deadline := time.Now().Add(reaperWait)
	var blankUntil time.Time // while a blank description may be a release
	for {
		err := syscall.Flock(int(db.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			db.Close()
			return nil, fmt.Errorf("lock %s: %w", real, err)
		}
		owner, _ := os.ReadFile(descPath)
		who := strings.TrimSpace(string(owner))
		if holderDead(who) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if who == "" && blankUntil.IsZero() {
			blankUntil = time.Now().Add(100 * time.Millisecond)
		}
		if who == "" && time.Now().Before(blankUntil) {
			// Release empties the description before it unlocks: a
			// holder letting go is seen blank for a moment.
			time.Sleep(5 * time.Millisecond)
			continue
		}
		db.Close()
		if who == "" {
			who = "another process (through another path to this file)"
		}
		return nil, &HeldError{Path: real, Who: who}
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(db.Fd()), &st); err != nil {
		db.Close()
		return nil, fmt.Errorf("stat %s: %w", real, err)
	}
	desc, err := os.OpenFile(descPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("take the database lock (is its directory writable?): %w", err)
	}
	l := &Lock{db: db, desc: desc, path: real, dev: uint64(st.Dev), ino: st.Ino}
	if err := l.Describe(""); err != nil {
		l.Release()
		return nil, err
	}
	return l, nil
}

// resolve is the real path of a database file: every symlink resolved,
// the file's own too when it exists.
func resolve(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real, nil
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		return "", err
	}
	if target, err := os.Readlink(abs); err == nil {
		// A dangling symlink: the file it names is where the database
		// will be.
		if !filepath.IsAbs(target) {
			target = filepath.Join(dir, target)
		}
		return resolve(target)
	}
	return filepath.Join(dir, filepath.Base(abs)), nil
}

// File is the locked database file. A child process that inherits it
// holds the lock with the server, and alone once the server is gone.
func (l *Lock) File() *os.File { return l.db }

// Path is the database's real path, which the store should open so that
// its journal files lie beside the locked file.
func (l *Lock) Path() string { return l.path }

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
	if err := l.desc.Truncate(0); err != nil {
		return err
	}
	_, err := l.desc.WriteAt([]byte(who+"\n"), 0)
	return err
}

// Check reports an error wrapping ErrReplaced when the file at the
// database's path is no longer the locked one: deleted, or replaced by
// another file.
func (l *Lock) Check() error {
	if l == nil {
		return nil
	}
	var st syscall.Stat_t
	if err := syscall.Stat(l.path, &st); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrReplaced, l.path, err)
	}
	if uint64(st.Dev) != l.dev || st.Ino != l.ino {
		return fmt.Errorf("%w: %s is another file now", ErrReplaced, l.path)
	}
	return nil
}

// Release gives the lock up. It is idempotent. Close the store first:
// closing a descriptor of the database drops the process's POSIX locks on
// it, SQLite's among them.
func (l *Lock) Release() {
	if l == nil {
		return
	}
	l.once.Do(func() {
		_ = l.desc.Truncate(0)
		_ = l.desc.Close()
		_ = syscall.Flock(int(l.db.Fd()), syscall.LOCK_UN)
		_ = l.db.Close()
	})
}

// holderDead reports whether the description names a server process that
// no longer exists.
func holderDead(who string) bool {
	var pid int
	if _, err := fmt.Sscanf(who, "agentd pid %d", &pid); err != nil || pid <= 0 {
		return false
	}
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
