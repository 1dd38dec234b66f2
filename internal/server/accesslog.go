package server

import (
	"log/slog"
	"net/http"
	"time"
)

// accessLog logs one line per request once it is answered: method, path,
// status, duration, bytes written and the client's address. An event
// stream is logged when it ends. The query is left out: it may name
// directories and files.
func (s *Server) accessLog(next http.Handler) http.Handler {
	log := s.cfg.Logger.With("component", "access")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		attrs := []slog.Attr{slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Int("status", status),
			slog.Duration("duration", time.Since(start)), slog.Int64("bytes", rec.bytes),
			slog.String("client", r.RemoteAddr)}
		if rec.keyID != "" {
			// The key that made the request, never its token.
			attrs = append(attrs, slog.String("key", rec.keyID), slog.String("key_name", rec.keyName))
		}
		log.LogAttrs(r.Context(), slog.LevelInfo, "request", attrs...)
	})
}

// recorder notes what a handler answered. Unwrap lets
// http.ResponseController reach the connection (flushes, deadlines).
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
	// keyID and keyName name the API key the request was made with.
	keyID, keyName string
}

func (r *recorder) noteKey(id, name string) { r.keyID, r.keyName = id, name }

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
