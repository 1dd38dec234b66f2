package server

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metricsHandler serves the process's own metrics in Prometheus text
// format: goroutines, heap, GC, resident memory, open files. A private
// registry keeps whatever else links client_golang out of agentd's answer.
func metricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) *apiError {
	s.metricsOnce.Do(func() { s.metricsH = metricsHandler() })
	s.metricsH.ServeHTTP(w, r)
	return nil
}
