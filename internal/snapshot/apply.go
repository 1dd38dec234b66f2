package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Apply carries out a plan: each step's To, or with back each step's Back
// (the rollback). Deletions come first, then the files are written, their
// contents read from the store in a few cat-file processes. Applying a
// plan again, forward or back, from any state a cut-off Apply left, ends
// in the same files: this is what makes a journaled restore recoverable.
// progress, when set, is called after each file changed with how many
// have been; an error from it stops Apply there and is returned.
func (s *Store) Apply(ctx context.Context, dir string, p Plan, back bool, progress func(done int) error) error {
	if len(p.Steps) == 0 {
		return nil
	}
	w, err := s.workspace(dir)
	if err != nil {
		return err
	}
	w.ops.Lock()
	defer w.ops.Unlock()
	if err := s.init(ctx, w); err != nil {
		return err
	}
	root, err := os.OpenRoot(w.dir)
	if err != nil {
		return err
	}
	defer root.Close()
	var writes []Entry
	var paths []string
	done := 0
	for _, st := range p.Steps {
		e := st.To
		if back {
			e = st.Back
		}
		if e.Blob != "" {
			writes = append(writes, e)
			paths = append(paths, st.Path)
			continue
		}
		if err := remove(root, st.Path); err != nil {
			return err
		}
		if err := step(ctx, &done, progress); err != nil {
			return err
		}
	}
	return s.blobs(ctx, w, writes, func(i int, data []byte) error {
		if err := writeEntry(root, paths[i], writes[i].Mode, data); err != nil {
			return err
		}
		return step(ctx, &done, progress)
	})
}

// step counts one changed file and reports it.
func step(ctx context.Context, done *int, progress func(int) error) error {
	*done++
	if progress != nil {
		if err := progress(*done); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// remove deletes a file or a symbolic link through the workspace's root,
// and the directories it leaves empty. A path already gone, or whose
// parent is no longer a directory, is done; a directory at the path is
// not the file to delete (its files have steps of their own) and stays.
func remove(root *os.Root, p string) error {
	if fi, err := root.Lstat(p); err == nil && fi.IsDir() {
		return nil
	}
	err := root.Remove(p)
	if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("restore %s: %w", p, err)
	}
	removeEmptyParents(root, filepath.Dir(p))
	return nil
}

// removeEmptyParents removes the directories a deleted file leaves empty,
// up to the workspace's root.
func removeEmptyParents(root *os.Root, dir string) {
	for dir != "." && dir != "/" && dir != "" {
		if root.Remove(dir) != nil {
			return
		}
		dir = filepath.Dir(dir)
	}
}

// writeEntry writes one file as a snapshot holds it, in place of whatever
// is there. A regular file of one link is rewritten in place (cheaper than
// a new inode); anything else is removed first, never written through (a
// symbolic link, or a hard link to a file elsewhere, stays untouched).
func writeEntry(root *os.Root, p, mode string, data []byte) error {
	perm := fs.FileMode(0o644)
	if mode == modeExec {
		perm = 0o755
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	fi, err := root.Lstat(p)
	switch {
	case err == nil && mode != modeLink && fi.Mode().IsRegular() && links(fi) == 1:
		flags = os.O_WRONLY | os.O_TRUNC
	case err == nil:
		if err := root.Remove(p); err != nil {
			return fmt.Errorf("restore %s: %w", p, err)
		}
	case errors.Is(err, fs.ErrNotExist):
		if d := filepath.Dir(p); d != "." {
			if err := root.MkdirAll(d, 0o755); err != nil {
				return fmt.Errorf("restore %s: %w", p, err)
			}
		}
	default:
		return fmt.Errorf("restore %s: %w", p, err)
	}
	if mode == modeLink {
		if err := root.Symlink(string(data), p); err != nil {
			return fmt.Errorf("restore %s: %w", p, err)
		}
		return nil
	}
	f, err := root.OpenFile(p, flags, perm)
	if err != nil {
		return fmt.Errorf("restore %s: %w", p, err)
	}
	_, err = f.Write(data)
	if err == nil && flags&os.O_TRUNC != 0 && fi.Mode().Perm() != perm {
		err = f.Chmod(perm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("restore %s: %w", p, err)
	}
	return nil
}

// links is how many names a file has (1 where the system does not say).
func links(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}
