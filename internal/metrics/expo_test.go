package metrics

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"

	"github.com/agentd/agentd/internal/core"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// awkward are label values a route, a model or a tool name could carry.
var awkward = []string{"plain", `quo"te`, `back\slash`, "new\nline", "ünï", "", "Zeta", "alpha"}

// TestTextMatchesClientGolang records the same observations in agentd's
// registry and in client_golang's and requires the same bytes: the
// exposition replaced client_golang, and scrapers, dashboards and the
// tests that diff /metrics must not see the difference.
func TestTextMatchesClientGolang(t *testing.T) {
	t.Parallel()
	var ours registry
	theirs := prometheus.NewRegistry()
	help := "Help with a back\\slash,\na newline and \"quotes\"."
	buckets := []float64{0, .0005, .001, .25, 1, 2.5, 3600}

	c := newFamily("t_calls_total", help, counterKind, nil, "tool", "result")
	pc := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "t_calls_total", Help: help}, []string{"tool", "result"})
	h := newFamily("t_duration_seconds", "Durations.", histogramKind, buckets, "route")
	ph := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "t_duration_seconds", Help: "Durations.", Buckets: buckets}, []string{"route"})
	g := newFamily("t_info", "Info.", gaugeKind, nil, "version", "goversion")
	pg := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "t_info", Help: "Info."}, []string{"version", "goversion"})
	one := newFamily("t_single", "One histogram without labels.", histogramKind, buckets)
	pone := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "t_single", Help: "One histogram without labels.", Buckets: buckets})
	ours.add(h, c, g, one)
	theirs.MustRegister(pc, ph, pg, pone)
	one.with()

	values := []float64{0, 1e-4, .0005, .0007, 1, 1.5, 3600, 1e6, 42.125, 1e-9}
	for i, a := range awkward {
		for j, b := range awkward[:3] {
			v := float64(i*7+j) * 0.3
			c.add(v, a, b)
			pc.WithLabelValues(a, b).Add(v)
		}
		for _, v := range values[:i+2] {
			h.observe(v, a)
			ph.WithLabelValues(a).Observe(v)
			one.observe(v * 3)
			pone.Observe(v * 3)
		}
		g.with(a, "go1").set(float64(i) - 2.5)
		pg.WithLabelValues(a, "go1").Set(float64(i) - 2.5)
	}
	want := textOf(t, theirs)
	var got bytes.Buffer
	w := bufio.NewWriter(&got)
	writeText(w, ours.gather())
	w.Flush()
	if got.String() != want {
		t.Errorf("text differs from client_golang's:\n%s", lineDiff(want, got.String()))
	}
}

func textOf(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, f := range fams {
		if _, err := expfmt.MetricFamilyToText(&b, f); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// lineDiff names the first lines that differ.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var out []string
	for i := 0; i < max(len(w), len(g)) && len(out) < 10; i++ {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			out = append(out, "want "+a, " got "+b)
		}
	}
	return strings.Join(out, "\n")
}

// TestScrapeParses scrapes a node's metrics the way Prometheus does
// (gzip, the text parser) and finds what was recorded, the series known
// at start at zero, the collectors' gauges and the runtime's figures.
func TestScrapeParses(t *testing.T) {
	t.Parallel()
	m := New()
	m.BuildInfo("1.2.3")
	m.Init(Known{Models: [][2]string{{"fake", "m1"}}, Tools: []string{"bash"}})
	m.InitRoutes([][2]string{{"GET", "/session/{id}"}})
	m.Register(NewStateCollector(fakeState{}, time.Second))
	m.RunStarted()
	m.RunEnded(core.RunSucceeded, "", 3*time.Second, 2)
	m.ToolCall("bash", core.ToolCompleted, 20*time.Millisecond)
	m.Request("GET", "/session/{id}", 404, time.Millisecond)
	m.CommitBatch(3)
	hooks := NewWebhooks(m, func(context.Context) (int64, int64, error) { return 4, 1, nil }, time.Second)
	hooks.Sent(time.Second)

	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL, nil)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := srv.Client().Transport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != contentType {
		t.Errorf("Content-Type %q", ct)
	}
	if resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("asked for gzip, got Content-Encoding %q", resp.Header.Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(zr)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, body)
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"agentd_runs_started_total", nil, 1},
		{"agentd_runs_ended_total", map[string]string{"outcome": "succeeded", "reason": ""}, 1},
		{"agentd_runs_ended_total", map[string]string{"outcome": "failed", "reason": "max_steps"}, 0},
		{"agentd_run_steps", map[string]string{"outcome": "succeeded"}, 1},
		{"agentd_tool_calls_total", map[string]string{"tool": "bash", "result": "completed"}, 1},
		{"agentd_tool_calls_total", map[string]string{"tool": "bash", "result": "error"}, 0},
		{"agentd_model_tokens_total", map[string]string{"provider": "fake", "model": "m1", "type": "input"}, 0},
		{"agentd_http_requests_total", map[string]string{"method": "GET", "route": "/session/{id}", "code": "4xx"}, 1},
		{"agentd_http_requests_total", map[string]string{"method": "GET", "route": "/session/{id}", "code": "2xx"}, 0},
		{"agentd_store_commit_batch_size", nil, 1},
		{"agentd_build_info", map[string]string{"version": "1.2.3"}, 1},
		{"agentd_runs_active", map[string]string{"state": "running", "phase": ""}, 0},
		{"agentd_runs_active", map[string]string{"state": "running", "phase": "recovering"}, 2},
		{"agentd_event_log_events", nil, 10},
		{"agentd_sse_events_dropped_total", nil, 7},
		{"agentd_webhook_sent_total", nil, 1},
		{"agentd_webhook_latency_seconds", nil, 1},
		{"agentd_webhook_deliveries", map[string]string{"state": "pending"}, 4},
		{"go_info", map[string]string{}, 1},
		{"go_gc_duration_seconds", nil, -1},
		{"process_open_fds", nil, -1},
		{"process_start_time_seconds", nil, -1},
	} {
		v, ok := find(fams, c.name, c.labels)
		if !ok {
			t.Errorf("%s%v: no such series", c.name, c.labels)
		} else if c.want >= 0 && v != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, v, c.want)
		}
	}
	h := fams["agentd_run_duration_seconds"].Metric
	for _, s := range h {
		hist := s.GetHistogram()
		last := hist.Bucket[len(hist.Bucket)-1]
		if s.Label[0].GetValue() == "succeeded" && (hist.GetSampleCount() != 1 || hist.GetSampleSum() != 3 || last.GetCumulativeCount() != 1) {
			t.Errorf("run duration of the succeeded run: %v", hist)
		}
	}
}

// find is the value of name's series whose labels include want (a
// histogram's or summary's count); ok false when none.
func find(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		switch {
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		case m.Summary != nil:
			return float64(m.Summary.GetSampleCount()), true
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		default:
			return m.Gauge.GetValue(), true
		}
	}
	return 0, false
}

type fakeState struct{}

func (fakeState) ActiveRuns(ctx context.Context) (map[[2]string]int, error) {
	return map[[2]string]int{{"running", "recovering"}: 2}, nil
}
func (fakeState) PendingPermissions(ctx context.Context) (int, error) { return 1, nil }
func (fakeState) EventLog(ctx context.Context) (int64, int64, error)  { return 11, 20, nil }
func (fakeState) Subscribers() int                                    { return 3 }
func (fakeState) Delivered() int64                                    { return 5 }
func (fakeState) Dropped() int64                                      { return 7 }
