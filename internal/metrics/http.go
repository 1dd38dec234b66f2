package metrics

import (
	"runtime"
	"runtime/debug"
	"strconv"
	"time"
)

// httpMetrics are the API's request metrics, by method and route pattern
// (never the raw path: ids would make a series per session).
type httpMetrics struct {
	requests *family
	duration *family
}

func newHTTPMetrics(reg *registry) httpMetrics {
	h := httpMetrics{
		requests: newFamily("agentd_http_requests_total",
			"HTTP requests answered, by method, route pattern and status class (2xx, 3xx, 4xx, 5xx).", counterKind, nil,
			"method", "route", "code"),
		duration: newFamily("agentd_http_request_duration_seconds",
			"Time to answer an HTTP request (event streams and waits: their whole life), by method and route pattern.",
			histogramKind, []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10, 60}, "method", "route"),
	}
	reg.add(h.requests, h.duration)
	return h
}

// statusClass is a status code's class: "2xx" for 204. A class, not the
// code, keeps the series few and known at start (InitRoutes).
func statusClass(status int) string {
	return strconv.Itoa(status/100) + "xx"
}

// InitRoutes creates the request series of every route (method and
// pattern) at zero: 2xx, 4xx and 5xx answers, and the latency. They are
// made at the first scrape, which is the first time anyone can see them,
// rather than on the way to the node's first healthy answer.
func (m *Metrics) InitRoutes(routes [][2]string) {
	m.reg.beforeGather(func() {
		for _, r := range routes {
			for _, c := range []string{"2xx", "4xx", "5xx"} {
				m.http.requests.with(r[0], r[1], c)
			}
			m.http.duration.with(r[0], r[1])
		}
	})
}

// Request records one answered request: its method, the route pattern it
// matched ("unmatched" when none), its status and how long it took.
func (m *Metrics) Request(method, route string, status int, d time.Duration) {
	m.http.requests.add(1, method, route, statusClass(status))
	m.http.duration.observe(d.Seconds(), method, route)
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
	g := newFamily("agentd_build_info", "Always 1; the labels say what runs: version, Go version and VCS revision.",
		gaugeKind, nil, "version", "goversion", "revision")
	g.with(version, runtime.Version(), rev).set(1)
	m.reg.add(g)
}
