package smallfile

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestReadIn reads a file of a root, and refuses a FIFO (without waiting
// on it), a directory and a file over the bound.
func TestReadIn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "ok"), []byte("hello"), 0o600)
	os.WriteFile(filepath.Join(dir, "big"), bytes.Repeat([]byte("x"), 11), 0o600)
	os.Mkdir(filepath.Join(dir, "dir"), 0o700)
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if b, err := ReadIn(root, "ok", 10); err != nil || string(b) != "hello" {
		t.Errorf("ok: %q, %v", b, err)
	}
	for name, want := range map[string]string{"big": "over the limit of 10 bytes", "dir": "not a regular file",
		"fifo": "not a regular file"} {
		if _, err := ReadIn(root, name, 10); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", name, err, want)
		}
	}
}

// TestReadNoFollow reads the first 64 KiB of a file, and refuses a link
// and a FIFO (without waiting on it).
func TestReadNoFollow(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	long := filepath.Join(dir, "long")
	os.WriteFile(long, bytes.Repeat([]byte("x"), 70<<10), 0o600)
	os.Symlink(long, filepath.Join(dir, "link"))
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadNoFollow(long); err != nil || len(b) != 64<<10 {
		t.Errorf("long: %d bytes, %v", len(b), err)
	}
	if _, err := ReadNoFollow(filepath.Join(dir, "link")); err == nil {
		t.Error("a link was followed")
	}
	if _, err := ReadNoFollow(filepath.Join(dir, "fifo")); err == nil || !strings.HasSuffix(err.Error(), "fifo: not a regular file") {
		t.Errorf("fifo: %v", err)
	}
}
