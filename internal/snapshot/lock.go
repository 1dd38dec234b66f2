package snapshot

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// opsLock serialises the operations on one store: within this process (a
// mutex), and between the processes that share the store (nodes on one
// machine, or on several that name a shared folder) by an exclusive flock
// on a file in the store's folder (agentd.lock, which git does not read),
// which the kernel drops when a process dies, kill -9 included. A store
// whose lock file cannot be opened is serialised within the process only.
type opsLock struct {
	mu   sync.Mutex
	path string
	f    *os.File // the file whose flock is held, while locked
}

// Lock takes the store for one operation.
func (l *opsLock) Lock() {
	l.mu.Lock()
	if l.path == "" {
		return
	}
	// Not made here when missing: the store's folder is made (and
	// checked) by init; its first operation is serialised in-process.
	f, err := os.OpenFile(l.path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return
	}
	l.f = f
}

// Unlock gives the store back.
func (l *opsLock) Unlock() {
	if l.f != nil {
		_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
		l.f.Close()
		l.f = nil
	}
	l.mu.Unlock()
}

// clearStaleLock removes the store's index.lock, which a git process of
// ours that was killed (a cancelled Track, a crash of the server) leaves
// behind, and which would make every later snapshot of the workspace
// fail. It is called before each operation with w.ops held: the store's
// operations wait for their git to exit, so while this process holds both
// the mutex and the flock no git of any agentd runs on the store, and a
// lock found then is stale. Without the flock (its file could not be
// opened) another process may be running git: the lock is left alone.
func clearStaleLock(w *workspace) error {
	if w.ops.f == nil {
		return nil
	}
	err := os.Remove(filepath.Join(w.gitDir, "index.lock"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
