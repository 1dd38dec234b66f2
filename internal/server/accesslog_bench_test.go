package server

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkAccessLog is what the access log adds to a request: one
// record through a JSON handler (to io.Discard), against the same
// request without it (a request id still made and set).
func BenchmarkAccessLog(b *testing.B) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"type":"idle"}`)
	})
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			s := &Server{cfg: Config{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), AccessLog: on}}
			handler := s.observe(h)
			req := httptest.NewRequest("GET", "/session/ses_x/status", nil)
			b.ReportAllocs()
			for b.Loop() {
				handler.ServeHTTP(httptest.NewRecorder(), req)
			}
		})
	}
}
