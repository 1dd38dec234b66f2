package sandbox

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// builder grants the rights of one command. Landlock only grants: a path
// is hidden by granting, on the way from a granted directory down to it,
// each sibling but the one that leads to it. The directories on the way
// keep only the right to be listed (which holds beneath them too, so the
// names in a hidden directory can be listed, never opened).
type builder struct {
	// hidden are the hidden paths that exist now, real (no symlinks).
	hidden []string
	add    func(fd int, access uint64) error
	err    error
}

// newBuilder keeps those of hidden that exist now: one that is created
// later is denied anyway in a directory carved around another, and one
// that does not exist needs no carving.
func newBuilder(hidden []string, add func(fd int, access uint64) error) *builder {
	b := &builder{add: add}
	for _, h := range hidden {
		if _, err := os.Lstat(h); err == nil {
			b.hidden = append(b.hidden, h)
		}
	}
	return b
}

// grant grants access beneath root (a real path), less the hidden paths
// strictly inside it. A root that does not exist is left out; a hidden
// path that is root itself, or holds it, does not hide it: a grant names
// the place on purpose.
func (b *builder) grant(root string, access uint64) {
	if b.err != nil {
		return
	}
	fd, err := unix.Open(root, unix.O_PATH|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return
	}
	if err != nil {
		b.err = fmt.Errorf("open %s: %w", root, err)
		return
	}
	defer unix.Close(fd)
	b.grantAt(fd, root, access)
}

// grantAt grants access beneath the file or directory open as fd (an
// O_PATH descriptor of path).
func (b *builder) grantAt(fd int, path string, access uint64) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		b.err = fmt.Errorf("stat %s: %w", path, err)
		return
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		// A rule on a link is a rule on the link, not on its target: the
		// target is granted (or not) where it lies.
		return
	case unix.S_IFDIR:
	default:
		if a := access & fileRights; a != 0 {
			b.set(fd, path, a)
		}
		return
	}
	if !b.holdsHidden(path) {
		b.set(fd, path, access)
		return
	}
	b.set(fd, path, access&fsReadDir)
	b.carve(fd, path, access)
}

// carve grants access to each entry of the directory open as fd but the
// hidden ones, carving further the entries that hold hidden paths.
func (b *builder) carve(fd int, path string, access uint64) {
	dfd, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		b.err = fmt.Errorf("open %s: %w", path, err)
		return
	}
	dir := os.NewFile(uintptr(dfd), path)
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		b.err = fmt.Errorf("list %s: %w", path, err)
		return
	}
	for _, name := range names {
		p := join(path, name)
		if b.isHidden(p) {
			continue
		}
		cfd, err := unix.Openat(dfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // gone since the listing
		}
		b.grantAt(cfd, p, access)
		unix.Close(cfd)
		if b.err != nil {
			return
		}
	}
}

func (b *builder) set(fd int, path string, access uint64) {
	if b.err != nil || access == 0 {
		return
	}
	if err := b.add(fd, access); err != nil {
		b.err = fmt.Errorf("grant %s: %w", path, err)
	}
}

// holdsHidden reports whether a hidden path lies strictly beneath dir.
func (b *builder) holdsHidden(dir string) bool {
	for _, h := range b.hidden {
		if within(dir, h) && h != dir {
			return true
		}
	}
	return false
}

func (b *builder) isHidden(p string) bool {
	for _, h := range b.hidden {
		if h == p {
			return true
		}
	}
	return false
}
