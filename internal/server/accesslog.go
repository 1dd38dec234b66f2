package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"time"
)

// requestIDHeader carries a request's id: the client's when it sent a
// usable one, else one the server made. The answer always carries it.
const requestIDHeader = "X-Request-Id"

// reqInfo is what the layers of one request learn about it: its id, and
// the route pattern that answered (set by dispatch).
type reqInfo struct {
	id    string
	route string
}

type reqInfoKey struct{}

// routeOf is the pattern of the route that answered, for the metrics.
func routeOf(status int, info *reqInfo) string {
	switch {
	case info.route != "":
		return info.route
	case status == http.StatusNotFound:
		return "unmatched"
	}
	return "other" // the dashboard's files, /debug/pprof, the redirect of /
}

// observe gives each request an id (in the answer's X-Request-Id and in
// error bodies), counts it and its latency by method and route pattern
// (Config.ObserveRequest), and, with AccessLog, logs one line once it is
// answered: method, path, status, duration, bytes, client and request id.
// An event stream is logged when it ends. The query is left out of the
// log: it may name directories and files.
func (s *Server) observe(next http.Handler) http.Handler {
	log := s.cfg.Logger.With("component", "access")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		info := &reqInfo{id: requestID(r.Header.Get(requestIDHeader))}
		w.Header().Set(requestIDHeader, info.id)
		rec := &recorder{ResponseWriter: w}
		next.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), reqInfoKey{}, info)))
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		d := time.Since(start)
		if s.cfg.ObserveRequest != nil {
			s.cfg.ObserveRequest(r.Method, routeOf(status, info), status, d)
		}
		if !s.cfg.AccessLog {
			return
		}
		attrs := []slog.Attr{slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Int("status", status),
			slog.Duration("duration", d), slog.Int64("bytes", rec.bytes),
			slog.String("client", r.RemoteAddr), slog.String("request_id", info.id)}
		if rec.keyID != "" {
			// The key that made the request, never its token.
			attrs = append(attrs, slog.String("key", rec.keyID), slog.String("key_name", rec.keyName))
		}
		log.LogAttrs(r.Context(), slog.LevelInfo, "request", attrs...)
	})
}

// requestID is the client's id when it is one a log line can carry as is
// (1 to 128 letters, digits and -_.:), else a new random one.
func requestID(client string) string {
	ok := client != "" && len(client) <= 128
	for i := 0; ok && i < len(client); i++ {
		c := client[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':'
	}
	if ok {
		return client
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Routes lists the API's routes, method and pattern, as the request
// metrics label them.
func (s *Server) Routes() [][2]string {
	out := make([][2]string, 0, len(s.routes))
	for _, rt := range s.routes {
		out = append(out, [2]string{rt.method, rt.pattern})
	}
	return out
}

// setRoute records the pattern of the route answering r.
func setRoute(r *http.Request, pattern string) {
	if info, ok := r.Context().Value(reqInfoKey{}).(*reqInfo); ok {
		info.route = pattern
	}
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
