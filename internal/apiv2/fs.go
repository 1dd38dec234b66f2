package apiv2

import (
	"net/http"
	"strconv"
)

// The file routes: opencode 2's reads of a directory, through the server's
// file access (the v1 file routes' checks and the operator's read rules).

// readLimit bounds a file read whole into an answer.
const readLimit = 10 << 20

func (a *API) fsRead(w http.ResponseWriter, r *http.Request) *apiError {
	dir, e := a.reqDir(r)
	if e != nil {
		return e
	}
	p := r.PathValue("path")
	if p == "" {
		return invalid("path: required (/api/fs/read/<path>)")
	}
	b, mt, err := a.cfg.Files.Read(dir, p, readLimit)
	if err != nil {
		return fileErr(err, p)
	}
	h := w.Header()
	h.Set("Content-Type", mt)
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("X-Content-Type-Options", "nosniff")
	// A workspace's HTML or SVG opened in a browser must not run as the
	// server's own page (its origin passes the API's origin checks).
	h.Set("Content-Security-Policy", "default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; sandbox")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	return nil
}

func (a *API) fsList(w http.ResponseWriter, r *http.Request) *apiError {
	dir, e := a.reqDir(r)
	if e != nil {
		return e
	}
	p := r.URL.Query().Get("path")
	list, err := a.cfg.Files.List(dir, p)
	if err != nil {
		return fileErr(err, p)
	}
	writeJSON(w, http.StatusOK, map[string]any{"location": location(dir), "data": list})
	return nil
}

// fsFind is the TUI's @ completion: files and folders (type= keeps one
// kind) whose path fuzzily matches the query.
func (a *API) fsFind(w http.ResponseWriter, r *http.Request) *apiError {
	dir, e := a.reqDir(r)
	if e != nil {
		return e
	}
	q := r.URL.Query()
	typ := q.Get("type")
	if typ != "" && typ != "file" && typ != "directory" {
		return invalid("type: %q is not file or directory", typ)
	}
	// opencode's defaults: 50 entries, folders too unless dirs=false.
	limit, e := pageLimit(r, 50, 200)
	if e != nil {
		return e
	}
	list, err := a.cfg.Files.Find(r.Context(), dir, q.Get("query"), q.Get("dirs") != "false", typ, limit)
	if err != nil {
		return fileErr(err, dir)
	}
	writeJSON(w, http.StatusOK, map[string]any{"location": location(dir), "data": list})
	return nil
}
