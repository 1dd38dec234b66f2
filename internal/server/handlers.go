package server

import (
	"errors"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// health answers healthy while the node can keep what it is given; once
// its storage is lost (the database file deleted or replaced) it answers
// 503 with the reason.
func (s *Server) health(w http.ResponseWriter, r *http.Request) *apiError {
	if s.cfg.Unhealthy != nil {
		if err := s.cfg.Unhealthy(); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, healthJSON{Healthy: false, Version: s.cfg.Version, Error: err.Error()})
			return nil
		}
	}
	writeJSON(w, http.StatusOK, healthJSON{Healthy: true, Version: s.cfg.Version})
	return nil
}

// node answers GET /node. opencode's health schema admits no other field,
// so what a cluster's operator needs is here.
func (s *Server) node(w http.ResponseWriter, r *http.Request) *apiError {
	leases := 0
	if s.cfg.Node.Leases != nil {
		leases = s.cfg.Node.Leases()
	}
	ans := nodeJSON{Node: s.cfg.Node.ID, Database: s.cfg.Node.Database, Leases: leases, Version: s.cfg.Version,
		Sandbox: s.cfg.Node.Sandbox}
	if s.cfg.Node.Cluster != nil {
		cl, err := s.cfg.Node.Cluster(r.Context())
		if err != nil {
			return s.storeErr(err, "list the cluster's nodes")
		}
		ans.Cluster = cl
	}
	writeJSON(w, http.StatusOK, ans)
	return nil
}

// directory returns the workspace a request selects: ?directory=, then the
// x-opencode-directory header (which opencode's SDK percent-encodes),
// then the server's own directory.
func (s *Server) directory(r *http.Request) (string, *apiError) {
	d := r.URL.Query().Get("directory")
	if d == "" {
		d = r.Header.Get("x-opencode-directory")
	}
	if !filepath.IsAbs(d) {
		// opencode's SDK percent-encodes the directory it sends.
		if u, err := url.PathUnescape(d); err == nil {
			d = u
		}
	}
	if d == "" {
		return s.cfg.Directory, nil
	}
	if strings.ContainsRune(d, 0) || !filepath.IsAbs(d) {
		return "", badRequest("directory: %q must be an absolute path", d)
	}
	return filepath.Clean(d), nil
}

// workspaceDir checks that dir can be a session's workspace and returns it
// as it will be used: an existing directory, its symlinks resolved, that
// is not the filesystem's root or a kernel's file system (/proc, /sys,
// /dev), where every tool would reach the whole machine.
func workspaceDir(dir string) (string, *apiError) {
	real, err := filepath.EvalSymlinks(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", badRequest("directory: %s does not exist", dir)
	case err != nil:
		return "", badRequest("directory: %s: %v", dir, err)
	}
	if real == string(filepath.Separator) {
		return "", badRequest("directory: %s is the filesystem's root, which cannot be a workspace; choose a project's directory", dir)
	}
	for _, sys := range []string{"/proc", "/sys", "/dev"} {
		if real == sys || strings.HasPrefix(real, sys+"/") {
			return "", badRequest("directory: %s is in %s, which cannot be a workspace", dir, sys)
		}
	}
	st, err := os.Stat(real)
	switch {
	case err != nil:
		return "", badRequest("directory: %s: %v", dir, err)
	case !st.IsDir():
		return "", badRequest("directory: %s is not a directory", dir)
	}
	return real, nil
}
