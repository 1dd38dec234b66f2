package builtin

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/agentd/agentd/internal/tool"
)

// File access. Resolve judges a path once, but a path can change between
// that judgement and its use (a directory swapped for a symlink). Inside
// the workspace every open therefore goes through an os.Root, which
// refuses, at the moment of use, any symlink that leads out of it. Paths
// outside the workspace are reached only with the external_directory
// permission (or in a read-only directory agentd keeps), and opened
// directly.

// maxFileBytes bounds a file read whole (edit) or scanned (grep).
const maxFileBytes = 16 << 20

// errNotRegular refuses FIFOs, devices and sockets, which can block a
// read forever or never end.
var errNotRegular = errors.New("not a regular file")

// place is a resolved path: relative to the workspace root when inside it.
type place struct {
	abs  string
	root *os.Root // nil outside the workspace
	rel  string
}

// locate opens the workspace root for abs (a path Resolve returned) when
// abs is inside the call's workspace. The caller closes the place.
func locate(call tool.Call, abs string) (place, error) {
	ws, err := realPath(call.Directory)
	if err != nil {
		return place{}, err
	}
	if !Within(ws, abs) {
		return place{abs: abs}, nil
	}
	root, err := os.OpenRoot(ws)
	if err != nil {
		return place{}, err
	}
	rel, err := filepath.Rel(ws, abs)
	if err != nil {
		root.Close()
		return place{}, err
	}
	return place{abs: abs, root: root, rel: rel}, nil
}

func (p place) close() {
	if p.root != nil {
		p.root.Close()
	}
}

// openFile opens the place with flag. O_NONBLOCK keeps an open of a FIFO
// from waiting for a writer; callers check the file is regular.
func (p place) openFile(flag int, perm os.FileMode) (*os.File, error) {
	if p.root != nil {
		return p.root.OpenFile(p.rel, flag, perm)
	}
	return os.OpenFile(p.abs, flag, perm)
}

// openRegular opens a regular file for reading, refusing anything else.
func (p place) openRegular() (*os.File, os.FileInfo, error) {
	f, err := p.openFile(os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		if st.IsDir() {
			return nil, nil, fmt.Errorf("%s is a directory", p.abs)
		}
		return nil, nil, errNotRegular
	}
	return f, st, nil
}

// readAll reads a regular file whole, up to max bytes.
func (p place) readAll(max int64) ([]byte, os.FileInfo, error) {
	f, st, err := p.openRegular()
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if st.Size() > max {
		return nil, nil, fmt.Errorf("the file is %d bytes, more than the %d this tool handles", st.Size(), max)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, nil, err
	}
	if int64(len(b)) > max {
		return nil, nil, fmt.Errorf("the file grew past the %d bytes this tool handles", max)
	}
	return b, st, nil
}

// stat describes the place without following a final symlink out.
func (p place) stat() (os.FileInfo, error) {
	if p.root != nil {
		return p.root.Stat(p.rel)
	}
	return os.Stat(p.abs)
}

// writeAtomic replaces the file with data: a temporary file beside it,
// synced, renamed over it, and the directory synced.
func (p place) writeAtomic(data []byte, perm os.FileMode) error {
	if p.root == nil {
		if err := os.MkdirAll(filepath.Dir(p.abs), 0o755); err != nil {
			return err
		}
		return WriteFileAtomic(p.abs, data, perm)
	}
	dir := filepath.Dir(p.rel)
	if err := p.root.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if st, err := p.root.Lstat(p.rel); err == nil && !st.Mode().IsRegular() {
		return errNotRegular
	}
	tmp := filepath.Join(dir, "."+filepath.Base(p.rel)+".tmp-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	f, err := p.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			p.root.Remove(tmp)
		}
	}()
	if err := fill(f, data, perm); err != nil {
		return err
	}
	if err := p.root.Rename(tmp, p.rel); err != nil {
		return err
	}
	ok = true
	d, err := p.root.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// walk calls fn for each regular file under the place (a directory),
// skipping .git, node_modules and symlinks, until fn or ctx says stop.
// Inside the workspace it walks the root's file system, which never
// leaves it.
func (p place) walk(stop func() error, fn func(abs string, d fs.DirEntry) error) error {
	var fsys fs.FS
	start := "."
	if p.root != nil {
		fsys = p.root.FS()
		start = filepath.ToSlash(p.rel)
	} else {
		fsys = os.DirFS(p.abs)
	}
	base := p.abs
	if p.root != nil {
		base = p.root.Name()
	}
	return fs.WalkDir(fsys, start, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if err := stop(); err != nil {
			return err
		}
		abs := filepath.Join(base, filepath.FromSlash(name))
		if p.root == nil {
			abs = filepath.Join(p.abs, filepath.FromSlash(name))
		}
		if d.IsDir() {
			if skipDirs[d.Name()] && name != start {
				return fs.SkipDir
			}
			return fn(abs, d)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		return fn(abs, d)
	})
}

// openIn opens a regular file found by walk.
func (p place) openIn(abs string) (*os.File, error) {
	q := place{abs: abs}
	if p.root != nil {
		rel, err := filepath.Rel(p.root.Name(), abs)
		if err != nil {
			return nil, err
		}
		q.root, q.rel = p.root, rel
	}
	f, _, err := q.openRegular()
	return f, err
}
