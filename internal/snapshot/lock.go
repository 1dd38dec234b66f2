package snapshot

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// clearStaleLock removes the store's index.lock, which a git process of
// ours that was killed (a cancelled Track, a crash of the server) leaves
// behind, and which would make every later snapshot of the workspace fail.
// It is called with w.ops held, before each operation: the store's
// operations on a workspace take turns and wait for their git to exit, and
// no one else runs git on the store, so a lock found then is stale.
func clearStaleLock(w *workspace) error {
	err := os.Remove(filepath.Join(w.gitDir, "index.lock"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
