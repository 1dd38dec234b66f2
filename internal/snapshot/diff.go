package snapshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Restore puts files back as snapshot tree had them: those the tree holds
// are written, those it does not are deleted. Paths are relative to the
// workspace and never lead out of it.
func (s *Store) Restore(ctx context.Context, dir, tree string, files []string) error {
	if len(files) == 0 {
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
	out, err := s.run(ctx, w, nil, "ls-tree", "-r", "-z", "--name-only", "--full-tree", tree)
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(w.dir)
	if err != nil {
		return err
	}
	defer root.Close()
	in := map[string]bool{}
	for _, f := range bytes.Split(out, []byte{0}) {
		in[string(f)] = true
	}
	var checkout []byte
	for _, f := range files {
		clean := filepath.Clean(f)
		if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
			return fmt.Errorf("restore %q: not a path inside the workspace", f)
		}
		if in[f] {
			checkout = append(checkout, ":(literal)"...)
			checkout = append(checkout, f...)
			checkout = append(checkout, 0)
			continue
		}
		// Through the workspace's root: a symlinked directory on the way
		// cannot make the removal land outside.
		if err := root.Remove(clean); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("restore %s: %w", f, err)
		}
		removeEmptyParents(root, filepath.Dir(clean))
	}
	if len(checkout) > 0 {
		if _, err := s.run(ctx, w, checkout, "checkout", tree, "--pathspec-from-file=-", "--pathspec-file-nul"); err != nil {
			return err
		}
	}
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
