package app

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentd/agentd/internal/snapshot"
)

// toolScope names a database for the tools' process markers: a short hash
// of its absolute path, or of a shared database's URL and this node's
// address (nodes on one machine must not sweep each other's tools).
func toolScope(dbPath string, n nodeDesc) string {
	abs := dbPath
	if n.kind == "postgres" {
		abs += "#" + n.addr
	} else if a, err := filepath.Abs(dbPath); err == nil {
		abs = a
	}
	sum := sha256.Sum256([]byte(abs))
	return hex.EncodeToString(sum[:6])
}

// outputDir is the private folder (0700) where a node keeps the whole
// output of tool calls cut for the model: beside a SQLite database, in the
// user's cache directory for a shared one (each node its own).
func outputDir(dbPath string, n nodeDesc) (string, error) {
	dir := dbPath + ".tool-output"
	if n.kind == "postgres" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		dir = filepath.Join(base, "agentd", "tool-output", toolScope(dbPath, n))
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create the tool output folder: %w", err)
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return "", fmt.Errorf("tool output folder: %w", err)
	}
	if !st.IsDir() {
		return "", fmt.Errorf("tool output folder %s is not a directory", dir)
	}
	if st.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return "", fmt.Errorf("tool output folder: %w", err)
		}
	}
	return dir, nil
}

// snapshotDir is where the snapshot stores live by default: beside a
// SQLite database (its one process), under the user's data directory for
// a shared database, so that the nodes of one machine share them.
func snapshotDir(dbPath string, n nodeDesc) string {
	if n.kind == "postgres" {
		return snapshot.DefaultDir()
	}
	return dbPath + ".snapshot"
}
