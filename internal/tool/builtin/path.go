// Package builtin holds agentd's coding tools: bash, read, write, edit,
// glob, grep and list. Every path a tool touches is resolved inside the
// session's workspace; a path that leads outside — through "..", an
// absolute path or a symlink — is refused unless the external_directory
// permission allows it.
package builtin

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrOutside is returned for a path that resolves outside the workspace.
var ErrOutside = errors.New("path is outside the workspace")

// Resolve turns p (absolute, or relative to the workspace) into an absolute
// path with every symlink of its existing prefix resolved, and reports an
// error wrapping ErrOutside when that path is not inside the workspace.
func Resolve(workspace, p string) (string, error) {
	if strings.ContainsRune(p, 0) || strings.ContainsRune(workspace, 0) {
		return "", errors.New("path contains a NUL byte")
	}
	ws, err := realPath(workspace)
	if err != nil {
		return "", fmt.Errorf("workspace %s: %w", workspace, err)
	}
	if p == "" {
		p = "."
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(ws, p)
	}
	real, err := realPath(filepath.Clean(p))
	if err != nil {
		return "", err
	}
	if !Within(ws, real) {
		return real, fmt.Errorf("%s: %w", p, ErrOutside)
	}
	return real, nil
}

// Within reports whether path is root or below it. Both must be clean and
// absolute.
func Within(root, path string) bool {
	if path == root {
		return true
	}
	if root == string(filepath.Separator) {
		return strings.HasPrefix(path, root)
	}
	return strings.HasPrefix(path, root+string(filepath.Separator))
}

// realPath resolves symlinks in the longest existing prefix of p and
// appends the rest, so that paths of files yet to be written are judged by
// where they would really land.
func realPath(p string) (string, error) {
	p = filepath.Clean(p)
	rest := ""
	cur := p
	for {
		r, err := filepath.EvalSymlinks(cur)
		if err == nil {
			if rest == "" {
				return r, nil
			}
			return filepath.Join(r, rest), nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return p, nil
		}
		// A dangling symlink could still point outside once created;
		// resolve its target by hand.
		if target, lerr := os.Readlink(cur); lerr == nil {
			if !filepath.IsAbs(target) {
				target = filepath.Join(parent, target)
			}
			resolved, err := realPath(target)
			if err != nil {
				return "", err
			}
			if rest == "" {
				return resolved, nil
			}
			return filepath.Join(resolved, rest), nil
		}
		base := filepath.Base(cur)
		if rest == "" {
			rest = base
		} else {
			rest = filepath.Join(base, rest)
		}
		cur = parent
	}
}
