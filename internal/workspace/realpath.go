package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Hide reports whether a path (relative to the directory, slash
// separated, symlinks resolved) is kept from the routes: the operator's
// read rules, as the server applies them.
type Hide func(rel string) bool

// ErrDenied is returned for a path a Hide keeps from the routes.
var ErrDenied = errors.New("reading this path is denied by the operator's rules")

// openedRel is where an opened file really is, relative to dir (which
// must be a real path): what the kernel says the descriptor names, so a
// symlink swapped in after a check cannot point the read elsewhere; else
// (no /proc) the path p resolved.
func openedRel(dir, p string, f *os.File) (string, error) {
	real := ""
	if sc, err := f.SyscallConn(); err == nil {
		_ = sc.Control(func(fd uintptr) {
			if l, err := os.Readlink("/proc/self/fd/" + strconv.FormatUint(uint64(fd), 10)); err == nil && filepath.IsAbs(l) {
				real = l
			}
		})
	}
	if real == "" {
		var err error
		if real, err = filepath.EvalSymlinks(filepath.Join(dir, p)); err != nil {
			return "", err
		}
	}
	return relWithin(dir, real)
}

// relWithin is real relative to dir, slash separated; ErrOutside when it
// is not below dir.
func relWithin(dir, real string) (string, error) {
	r, err := filepath.Rel(dir, real)
	if err != nil || r == ".." || strings.HasPrefix(r, "../") {
		return "", ErrOutside
	}
	return filepath.ToSlash(r), nil
}

// Resolved is p (relative to dir, a real path) with its symlinks
// resolved, relative to dir; false when it does not exist or leads out.
func Resolved(dir, p string) (string, bool) {
	real, err := filepath.EvalSymlinks(filepath.Join(dir, filepath.FromSlash(p)))
	if err != nil {
		return "", false
	}
	r, err := relWithin(dir, real)
	return r, err == nil
}
