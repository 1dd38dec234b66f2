// Package ui is agentd's web dashboard: static files embedded in the
// binary (no build step, nothing fetched from elsewhere) that use agentd's
// public HTTP API and event stream from the browser.
package ui

import (
	"bytes"
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed static
var files embed.FS

// Handler serves the dashboard's page at prefix (e.g. "/ui") and its files
// under prefix + "/". The page may load nothing but its own files and talk
// to nothing but its own origin. initial, when not nil, gives the JSON the
// page carries inline for its first view (see the server's uiInitial); it
// must be safe inside a <script> element.
func Handler(prefix string, initial func(*http.Request) []byte) http.Handler {
	sub, err := fs.Sub(files, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hdr := w.Header()
		hdr.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		hdr.Set("X-Content-Type-Options", "nosniff")
		hdr.Set("Referrer-Policy", "no-referrer")
		hdr.Set("Cache-Control", "no-cache")
		name := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, prefix), "/")
		if name == "" || name == "index.html" {
			// Written directly: the file server would redirect index.html
			// to its directory, whose path ends in a slash.
			b, err := fs.ReadFile(sub, "index.html")
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			if initial != nil {
				if data := initial(r); data != nil {
					b = bytes.Replace(b, []byte(`<script type="application/json" id="initial"></script>`),
						append(append([]byte(`<script type="application/json" id="initial">`), data...), "</script>"...), 1)
				}
			}
			hdr.Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write(b)
			return
		}
		http.ServeFileFS(w, r, sub, name)
	})
}
