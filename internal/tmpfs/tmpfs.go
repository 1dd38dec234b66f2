// Package tmpfs gives tests a real file system that fills up or turns
// read-only, by mounting a small tmpfs. Mounting needs CAP_SYS_ADMIN (root
// in CI); without it the tests that need one are skipped with the reason.
package tmpfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Mount mounts a tmpfs of the given size ("16m") on a fresh directory,
// unmounts it when the test ends and returns the directory.
func Mount(t testing.TB, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := mount(dir, "size="+size); err != nil {
		t.Skipf("cannot mount a tmpfs here (needs CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() {
		if err := unmount(dir); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// ReadOnly remounts the tmpfs at dir read-only: every write then fails with
// EROFS, root's included (unlike a chmod).
func ReadOnly(t testing.TB, dir string) {
	t.Helper()
	if err := remount(dir, true); err != nil {
		t.Fatalf("remount %s read-only: %v", dir, err)
	}
}

// Fill writes a file into dir until the file system is full and returns
// its path; removing it frees the space again.
func Fill(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	if err := FillFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// FillFile writes path until the file system holding it is full. It
// returns nil once a write fails with ENOSPC.
func FillFile(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for size := len(buf); size > 0; {
		_, err := f.Write(buf[:size])
		if errors.Is(err, syscall.ENOSPC) {
			// Fill the last partial block too.
			size /= 2
			continue
		}
		if err != nil {
			return fmt.Errorf("fill %s: %w", path, err)
		}
	}
	return nil
}
