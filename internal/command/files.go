package command

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/agentd/agentd/internal/smallfile"
)

// Command files are read through an os.Root: a project's command folders
// through the root of the project directory they belong to, so that a
// symlinked file or folder that leads out of it is refused instead of
// followed (a model that can write .opencode/command could otherwise
// make /command serve any file the server can read). Only regular files
// are read, opened without blocking (a FIFO named review.md hung the
// request), and at most MaxFileBytes of each.

// MaxFileBytes bounds a command file.
const MaxFileBytes = 256 << 10

// folder is a folder of command files: sub, below the directory root.
type folder struct {
	root string
	sub  string
}

func (f folder) String() string { return filepath.Join(f.root, f.sub) }

// LoadDir adds the command files (*.md) under dir to s, named by their
// path below dir without the extension ("git/commit.md" is "git/commit").
// A missing directory adds nothing; a file that cannot be read or parsed
// is skipped and named in the error, the others are loaded.
func (s Set) LoadDir(dir string) error {
	return s.load(folder{root: dir, sub: "."})
}

// LoadProject adds the command files of dir's project folders
// (ProjectFolders in dir and its parents up to its repository's root),
// marked Project, the repository root's first: a later
// folder's file replaces an earlier one of the same name.
func (s Set) LoadProject(dir string) error {
	var errs []error
	loaded := Set{}
	for _, f := range projectFolders(dir) {
		errs = append(errs, loaded.load(f))
	}
	for name, c := range loaded {
		c.Project = true
		s[name] = c
	}
	return errors.Join(errs...)
}

// load reads one folder's files into s.
func (s Set) load(f folder) error {
	root, err := os.OpenRoot(f.root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("load commands from %s: %w", f, err)
	}
	defer root.Close()
	var errs []error
	err = fs.WalkDir(root.FS(), filepath.ToSlash(f.sub), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == filepath.ToSlash(f.sub) {
				return fs.SkipDir
			}
			errs = append(errs, fmt.Errorf("command folder %s: %w", filepath.Join(f.root, p), err))
			return nil
		}
		if d.IsDir() || path.Ext(p) != ".md" {
			return nil
		}
		data, err := smallfile.ReadIn(root, p, MaxFileBytes)
		if err != nil {
			errs = append(errs, fmt.Errorf("command file %s: %w", filepath.Join(f.root, p), err))
			return nil
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p, filepath.ToSlash(f.sub)), "/")
		c, err := Parse(strings.TrimSuffix(rel, ".md"), data)
		if err != nil {
			errs = append(errs, fmt.Errorf("command file %s: %w", filepath.Join(f.root, p), err))
			return nil
		}
		s[c.Name] = c
		return nil
	})
	if err != nil {
		errs = append(errs, fmt.Errorf("load commands from %s: %w", f, err))
	}
	return errors.Join(errs...)
}
