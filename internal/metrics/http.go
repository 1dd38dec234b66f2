package metrics

import (
	"runtime"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// httpMetrics are the API's request metrics, by method and route pattern
// (never the raw path: ids would make a series per session).
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newHTTPMetrics(reg *prometheus.Registry) httpMetrics {
	h := httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentd_http_requests_total",
			Help: "HTTP requests answered, by method, route pattern and status class (2xx, 3xx, 4xx, 5xx)."}, []string{"method", "route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "agentd_http_request_duration_seconds",
			Help:    "Time to answer an HTTP request (event streams and waits: their whole life), by method and route pattern.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10, 60}}, []string{"method", "route"}),
	}
	reg.MustRegister(h.requests, h.duration)
	return h
}

// statusClass is a status code's class: "2xx" for 204. A class, not the
// code, keeps the series few and known at start (InitRoutes).
func statusClass(status int) string {
	return strconv.Itoa(status/100) + "xx"
}

// InitRoutes creates the request series of every route (method and
// pattern) at zero: 2xx, 4xx and 5xx answers, and the latency.
func (m *Metrics) InitRoutes(routes [][2]string) {
	for _, r := range routes {
		for _, c := range []string{"2xx", "4xx", "5xx"} {
			m.http.requests.WithLabelValues(r[0], r[1], c)
		}
		m.http.duration.WithLabelValues(r[0], r[1])
	}
}

// Request records one answered request: its method, the route pattern it
// matched ("unmatched" when none), its status and how long it took.
func (m *Metrics) Request(method, route string, status int, d time.Duration) {
	m.http.requests.WithLabelValues(method, route, statusClass(status)).Inc()
	m.http.duration.WithLabelValues(method, route).Observe(d.Seconds())
}

// BuildInfo exports agentd_build_info, always 1, whose labels say what
// runs: agentd's version, the Go version and the VCS revision it was
// built from ("unknown" outside a checkout, "+dirty" marks local changes).
// Only the first call counts.
func (m *Metrics) BuildInfo(version string) {
	m.buildInfo.Do(func() { m.registerBuildInfo(version) })
}

func (m *Metrics) registerBuildInfo(version string) {
	rev, dirty := "unknown", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if dirty {
		rev += "+dirty"
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "agentd_build_info",
		Help:        "Always 1; the labels say what runs: version, Go version and VCS revision.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": runtime.Version(), "revision": rev}})
	g.Set(1)
	m.reg.MustRegister(g)
}
