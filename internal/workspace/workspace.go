// Package workspace answers what opencode's clients ask of a session's
// directory: its files and folders (GET /file, /api/fs/list), a file's
// content (/file/content), fuzzy file search (/find/file, /api/fs/find),
// text search (/find) and the project's git status (/file/status). Every
// path stays inside the directory (symlinks that lead out are not
// followed), answers are bounded, and .git, node_modules and agentd's own
// folder are left out of listings and searches.
package workspace

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"
)

// MaxContent bounds the bytes of a file /file/content returns.
const MaxContent = 4 << 20

// skipped are the folders listings and searches leave out.
var skipped = map[string]bool{".git": true, "node_modules": true, ".agentd": true}

// ErrOutside is returned for a path that leads out of the directory.
var ErrOutside = errors.New("path is outside the workspace")

// Node is an entry of a folder, in opencode's FileNode shape.
type Node struct {
	Name     string `json:"name"`
	Path     string `json:"path"`
	Absolute string `json:"absolute"`
	Type     string `json:"type"`
	Ignored  bool   `json:"ignored"`
}

// Content is a file's content, in opencode's FileContent shape: text, or
// base64 for binary files.
type Content struct {
	Type     string `json:"type"`
	Content  string `json:"content"`
	Encoding string `json:"encoding,omitempty"`
	MimeType string `json:"mimeType,omitempty"`
}

// rel cleans a path given relative to the directory (or absolute inside
// it) into a path for os.Root, refusing one that leads out.
func rel(dir, p string) (string, error) {
	if p == "" || p == "." || p == "/" {
		return ".", nil
	}
	if filepath.IsAbs(p) {
		r, err := filepath.Rel(dir, p)
		if err != nil {
			return "", ErrOutside
		}
		p = r
	}
	p = filepath.Clean(p)
	if p == ".." || strings.HasPrefix(p, "../") || filepath.IsAbs(p) {
		return "", ErrOutside
	}
	return p, nil
}

// List returns the entries of the folder p (relative to dir, a real
// path), folders first, then by name; an entry hide keeps (by its path
// with the folder's links resolved, or by where it links to) is left
// out.
func List(dir, p string, hide Hide) ([]Node, error) {
	r, err := rel(dir, p)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.OpenFile(r, os.O_RDONLY|nonblock, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	real, err := openedRel(dir, r, f)
	if err != nil {
		return nil, err
	}
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	out := []Node{}
	for _, e := range entries {
		if hidden(dir, path.Join(real, e.Name()), e, hide) {
			continue
		}
		typ := "file"
		if e.IsDir() {
			typ = "directory"
		}
		name := path.Join(filepath.ToSlash(r), e.Name())
		shown := name
		if typ == "directory" {
			shown += "/"
		}
		out = append(out, Node{Name: e.Name(), Path: shown, Absolute: filepath.Join(dir, filepath.FromSlash(name)), Type: typ, Ignored: skipped[e.Name()]})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Type != out[j].Type {
			return out[i].Type == "directory"
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// hidden reports whether hide keeps the entry at rel, or where it links.
func hidden(dir, rel string, e fs.DirEntry, hide Hide) bool {
	if hide == nil {
		return false
	}
	if hide(rel) {
		return true
	}
	if e.Type()&fs.ModeSymlink == 0 {
		return false
	}
	target, ok := Resolved(dir, rel)
	return ok && hide(target)
}

// Read returns the content of the file p (relative to dir, a real path),
// at most MaxContent bytes of it; ErrDenied when hide keeps the file it
// really opened (a symlink's target, wherever its links lead).
func Read(dir, p string, hide Hide) (Content, error) {
	f, r, err := openFile(dir, p, hide)
	if err != nil {
		return Content{}, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxContent))
	if err != nil {
		return Content{}, err
	}
	if binary(data) {
		mt := mime.TypeByExtension(filepath.Ext(r))
		if mt == "" {
			mt = http.DetectContentType(data)
		}
		if i := strings.IndexByte(mt, ';'); i >= 0 {
			mt = mt[:i]
		}
		return Content{Type: "binary", Content: base64.StdEncoding.EncodeToString(data), Encoding: "base64", MimeType: mt}, nil
	}
	return Content{Type: "text", Content: strings.TrimRight(string(data), "\n")}, nil
}

func binary(data []byte) bool {
	head := data[:min(len(data), 8192)]
	for _, b := range head {
		if b == 0 {
			return true
		}
	}
	return !utf8.Valid(head[:max(0, len(head)-4)])
}

// openFile opens the regular file p (relative to dir, a real path) for
// reading, and returns it with its path relative to dir; ErrDenied when
// hide keeps the file it really opened (a symlink's target, wherever its
// links lead).
func openFile(dir, p string, hide Hide) (*os.File, string, error) {
	r, err := rel(dir, p)
	if err != nil {
		return nil, "", err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, "", err
	}
	defer root.Close()
	f, err := root.OpenFile(r, os.O_RDONLY|nonblock, 0)
	if err != nil {
		return nil, "", err
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file", p)
	}
	if err == nil && hide != nil {
		var real string
		if real, err = openedRel(dir, r, f); err == nil && hide(real) {
			err = ErrDenied
		}
	}
	if err != nil {
		f.Close()
		return nil, "", err
	}
	return f, r, nil
}

// ReadBytes returns the bytes of the file p (relative to dir, a real
// path), at most limit of them, and its media type (from its name, else
// its content), under the same rules as Read; ErrTooLarge for a larger
// file.
func ReadBytes(dir, p string, hide Hide, limit int64) ([]byte, string, error) {
	f, r, err := openFile(dir, p, hide)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, "", err
	}
	if int64(len(data)) > limit {
		return nil, "", fmt.Errorf("%s: %w (over %d bytes)", p, ErrTooLarge, limit)
	}
	mt := mime.TypeByExtension(filepath.Ext(r))
	if mt == "" {
		mt = http.DetectContentType(data)
	}
	return data, mt, nil
}

// ErrTooLarge is a file over the size a read allows.
var ErrTooLarge = errors.New("file is too large")
