package server

import (
	"context"
	"errors"
	"path/filepath"

	"github.com/agentd/agentd/internal/workspace"
)

// FileAccess is how opencode 2's file routes (package apiv2) read a
// directory: with the checks and the operator's read rules of the file
// routes here, so that the two APIs show the same files.
type FileAccess struct{ s *Server }

// Files returns the server's file access.
func (s *Server) Files() FileAccess { return FileAccess{s} }

// Dir checks a request's directory ("" for the server's own) and returns
// it as it is read: an existing directory, its links resolved;
// workspace.ErrDenied when the operator's rules deny reading it.
func (f FileAccess) Dir(dir string) (string, error) {
	if dir == "" {
		dir = f.s.cfg.Directory
	}
	if !filepath.IsAbs(dir) {
		return "", badRequest("directory: %q must be an absolute path", dir)
	}
	real, e := workspaceDir(filepath.Clean(dir))
	if e != nil {
		return "", e
	}
	if rr := f.s.readRules(real); rr.prefix != "" && rr.prefix != "." && f.s.eng.Denied("read", rr.prefix) {
		return "", workspace.ErrDenied
	}
	return real, nil
}

// List lists the folder p of dir (a directory Dir returned).
func (f FileAccess) List(dir, p string) ([]workspace.Entry, error) {
	nodes, err := workspace.List(dir, p, f.s.readRules(dir).denied)
	if err != nil {
		return nil, err
	}
	out := make([]workspace.Entry, len(nodes))
	for i, n := range nodes {
		out[i] = workspace.Entry{Path: n.Path, Type: n.Type}
	}
	return out, nil
}

// Find searches dir's files (and, with dirs, folders; typ keeps one
// kind) fuzzily.
func (f FileAccess) Find(ctx context.Context, dir, query string, dirs bool, typ string, limit int) ([]workspace.Entry, error) {
	return f.s.findEntries(ctx, dir, query, dirs, typ, limit)
}

// Read returns the bytes of the file p of dir, at most limit of them,
// and its media type.
func (f FileAccess) Read(dir, p string, limit int64) ([]byte, string, error) {
	return workspace.ReadBytes(dir, p, f.s.readRules(dir).denied, limit)
}

// IsBadRequest reports whether err is a request's mistake the server's
// checks found (a directory that cannot be read), and its message.
func IsBadRequest(err error) (string, bool) {
	var ae *apiError
	if errors.As(err, &ae) && ae.status == 400 {
		return ae.msg, true
	}
	return "", false
}
