// Package ui is agentd's web dashboard: static files embedded in the
// binary (no build step, nothing fetched from elsewhere) that use agentd's
// public HTTP API and event stream from the browser.
package ui

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed static
var files embed.FS

// Handler serves the dashboard's page at prefix (e.g. "/ui") and its files
// under prefix + "/". The page may load nothing but its own files and talk
// to nothing but its own origin.
func Handler(prefix string) http.Handler {
	sub, err := fs.Sub(files, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	fsrv := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, prefix), "/")
		if name == "" || name == "index.html" {
			// FileServer would redirect index.html to the directory, whose
			// path ends in a slash.
			name = "index.html"
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/" + name
		hdr := w.Header()
		hdr.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		hdr.Set("X-Content-Type-Options", "nosniff")
		hdr.Set("Referrer-Policy", "no-referrer")
		hdr.Set("Cache-Control", "no-cache")
		if name == "index.html" {
			b, err := fs.ReadFile(sub, name)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			hdr.Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write(b)
			return
		}
		fsrv.ServeHTTP(w, r2)
	})
}
