package credential

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// readFile reads the credential file at path (none yet is no entries) and
// makes it readable by its owner only.
func readFile(path string) (map[string]Entry, error) {
	m := map[string]Entry{}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return m, nil
	case err != nil:
		return nil, fmt.Errorf("read credentials %s: %w", path, err)
	}
	if json.Unmarshal(b, &m) != nil {
		// The decoder's error may quote the file: it is not repeated.
		return nil, fmt.Errorf("read credentials %s: not a credential file (malformed JSON)", path)
	}
	if m == nil {
		m = map[string]Entry{}
	}
	if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(path, 0o600); err != nil {
			return nil, fmt.Errorf("credentials %s are readable by others and cannot be made private: %w", path, err)
		}
	}
	return m, nil
}

// changeFile is change for the file, under s.wmu: the whole file is
// written again with the entry changed.
func (s *Store) changeFile(id string, fn edit) (Entry, bool, bool, error) {
	cur, ok := s.m[id]
	next, keep, write := fn(cur, ok)
	if !write {
		return next, keep, false, nil
	}
	all := make(map[string]Entry, len(s.m)+1)
	for k, v := range s.m {
		all[k] = v
	}
	if keep {
		all[id] = next
	} else {
		delete(all, id)
	}
	b, err := json.MarshalIndent(all, "", "  ")
	if err != nil {
		return next, keep, false, err
	}
	if err := writeAtomic(s.path, b); err != nil {
		return next, keep, false, fmt.Errorf("write credentials %s: %w", s.path, err)
	}
	return next, keep, true, nil
}

// writeAtomic replaces path with data, mode 0600, all or nothing.
func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op once renamed
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
