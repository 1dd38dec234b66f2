// Package metrics holds agentd's Prometheus metrics: what one node did
// (runs it started and ended, model and tool calls, retries, tokens, store
// transactions) as counters and histograms updated where it happens, and
// what the shared state is (active runs, pending permissions, the event
// log) as gauges read from the store when scraped, so they cannot drift
// from it.
//
// Labels are bounded: outcomes, reasons, states and phases are fixed sets;
// providers, models and tools come from the configuration. No session or
// run id is ever a label.
//
// A nil *Metrics records nothing, so tests and tools that build an engine
// without metrics need no stand-in.
package metrics

import (
	"context"
	"net/http"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics records one node's activity. Its methods are safe for
// concurrent use and do nothing on a nil receiver.
type Metrics struct {
	reg *prometheus.Registry

	runsStarted   prometheus.Counter
	runsEnded     *prometheus.CounterVec
	runDuration   *prometheus.HistogramVec
	runSteps      *prometheus.HistogramVec
	recovered     *prometheus.CounterVec
	modelCalls    *prometheus.CounterVec
	modelDuration *prometheus.HistogramVec
	retries       *prometheus.CounterVec
	tokens        *prometheus.CounterVec
	cost          *prometheus.CounterVec
	toolCalls     *prometheus.CounterVec
	toolDuration  *prometheus.HistogramVec
	storeTx       *prometheus.HistogramVec
	commitBatch   prometheus.Histogram
}

// New returns metrics registered in a registry of their own (with the Go
// runtime's and the process's collectors), so that whatever else links
// client_golang stays out of agentd's answer.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	m := &Metrics{reg: reg}
	m.runsStarted = prometheus.NewCounter(prometheus.CounterOpts{Name: "agentd_runs_started_total",
		Help: "Runs admitted on this node (a run counts once, when the prompt that starts it is accepted)."})
	m.runsEnded = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentd_runs_ended_total",
		Help: "Runs this node ended, by outcome and reason."}, []string{"outcome", "reason"})
	m.runDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "agentd_run_duration_seconds",
		Help:    "Time from a run's admission to its end, by outcome.",
		Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600}}, []string{"outcome"})
	m.runSteps = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "agentd_run_steps",
		Help:    "Model steps a run took, by outcome.",
		Buckets: []float64{0, 1, 2, 3, 5, 8, 13, 21, 34, 50, 100}}, []string{"outcome"})
	m.recovered = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentd_recovery_runs_total",
		Help: "Runs found unfinished when this node started, by what recovery did with them."}, []string{"action"})
	m.modelCalls = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentd_model_calls_total",
		Help: "Model calls, by provider, model and result (ok, an HTTP status code, error or canceled)."},
		[]string{"provider", "model", "status"})
	m.modelDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "agentd_model_call_duration_seconds",
		Help:    "Time from a model call's request to the end of its stream.",
		Buckets: []float64{.05, .1, .25, .5, 1, 2, 4, 8, 15, 30, 60, 120, 300}}, []string{"provider", "model"})
	m.retries = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentd_model_retries_total",
		Help: "Model calls retried after a retryable failure, by provider and model."}, []string{"provider", "model"})
	m.tokens = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentd_model_tokens_total",
		Help: "Tokens the providers counted, by provider, model and type (input, output, reasoning, cache_read, cache_write)."},
		[]string{"provider", "model", "type"})
	m.cost = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentd_model_cost_dollars_total",
		Help: "What the model calls cost, in dollars, by provider and model (from the configured or built-in prices)."},
		[]string{"provider", "model"})
	m.toolCalls = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentd_tool_calls_total",
		Help: "Tool calls, by tool and result (completed or error; a refused permission is an error)."}, []string{"tool", "result"})
	m.toolDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "agentd_tool_call_duration_seconds",
		Help:    "Time a tool call ran, by tool.",
		Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 30, 60, 120, 600}}, []string{"tool"})
	m.storeTx = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "agentd_store_transaction_duration_seconds",
		Help:    "Time a write transaction took from its call to its durable commit, by result (ok or error).",
		Buckets: []float64{.0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 5}}, []string{"result"})
	m.commitBatch = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "agentd_store_commit_batch_size",
		Help:    "Transactions that shared one durable commit (SQLite's group commit).",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256}})
	reg.MustRegister(m.runsStarted, m.runsEnded, m.runDuration, m.runSteps, m.recovered,
		m.modelCalls, m.modelDuration, m.retries, m.tokens, m.cost, m.toolCalls, m.toolDuration, m.storeTx, m.commitBatch)
	return m
}

// Known are the label values a node can name before anything happened:
// its models and tools. Init exports their series at zero.
type Known struct {
	// Models are provider/model pairs (the default and small models).
	Models [][2]string
	// Tools are the tools' names.
	Tools []string
}

// outcomes pairs each run outcome with the reasons it can carry.
var outcomes = map[core.RunState][]core.EndReason{
	core.RunSucceeded:   {""},
	core.RunFailed:      {core.ReasonProviderError, core.ReasonRetriesExhausted, core.ReasonMaxSteps, core.ReasonCrashLoop, core.ReasonInternal, core.ReasonStructuredOutput, core.ReasonBudgetExceeded},
	core.RunInterrupted: {core.ReasonAborted, core.ReasonServerRestart, core.ReasonSuperseded, core.ReasonRejected},
}

// Init creates every series whose labels are known at start, at zero, so
// that a dashboard or an alert on a rate sees the series from the first
// scrape instead of only after the first event (a counter that appears at
// 1 hides that first event from rate()).
func (m *Metrics) Init(k Known) {
	if m == nil {
		return
	}
	for outcome, reasons := range outcomes {
		for _, r := range reasons {
			m.runsEnded.WithLabelValues(string(outcome), string(r))
		}
		m.runDuration.WithLabelValues(string(outcome))
		m.runSteps.WithLabelValues(string(outcome))
	}
	for _, a := range []string{"resumed", "interrupted", "failed", "queued"} {
		m.recovered.WithLabelValues(a)
	}
	for _, pm := range k.Models {
		m.modelCalls.WithLabelValues(pm[0], pm[1], "ok")
		m.modelDuration.WithLabelValues(pm[0], pm[1])
		m.retries.WithLabelValues(pm[0], pm[1])
		for _, t := range []string{"input", "output", "reasoning", "cache_read", "cache_write"} {
			m.tokens.WithLabelValues(pm[0], pm[1], t)
		}
		m.cost.WithLabelValues(pm[0], pm[1])
	}
	for _, t := range k.Tools {
		m.toolCalls.WithLabelValues(t, core.ToolCompleted)
		m.toolCalls.WithLabelValues(t, core.ToolError)
		m.toolDuration.WithLabelValues(t)
	}
	m.storeTx.WithLabelValues("ok")
	m.storeTx.WithLabelValues("error")
}

// WritePath is a store with one writer (SQLite's committer): how many
// transactions wait for it, and how long it has been busy.
type WritePath interface {
	Waiting() int
	BusySeconds() float64
}

// ObserveWritePath exports the writer's queue and busy time, read at each
// scrape: agentd_store_tx_waiting and
// agentd_store_committer_busy_seconds_total (its rate is the writer's
// busy share, 1 meaning saturated).
func (m *Metrics) ObserveWritePath(w WritePath) {
	if m == nil {
		return
	}
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "agentd_store_tx_waiting",
			Help: "Write transactions waiting for the committer (SQLite's one writer)."},
			func() float64 { return float64(w.Waiting()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "agentd_store_committer_busy_seconds_total",
			Help: "Time the committer (SQLite's one writer) spent committing; its rate is the writer's busy share."},
			w.BusySeconds),
	)
}

// Register adds collectors (the store's and the hub's gauges) to the
// metrics' registry.
func (m *Metrics) Register(cs ...prometheus.Collector) {
	if m == nil {
		return
	}
	m.reg.MustRegister(cs...)
}

// Handler serves the metrics in Prometheus's text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// RunStarted counts a run admitted.
func (m *Metrics) RunStarted() {
	if m != nil {
		m.runsStarted.Inc()
	}
}

// RunEnded counts a run's end.
func (m *Metrics) RunEnded(outcome core.RunState, reason core.EndReason, d time.Duration, steps int) {
	if m == nil {
		return
	}
	m.runsEnded.WithLabelValues(string(outcome), string(reason)).Inc()
	m.runDuration.WithLabelValues(string(outcome)).Observe(d.Seconds())
	m.runSteps.WithLabelValues(string(outcome)).Observe(float64(steps))
}

// Recovered counts a run found unfinished at start, by what was done.
func (m *Metrics) Recovered(action string) {
	if m != nil {
		m.recovered.WithLabelValues(action).Inc()
	}
}

// ModelCall records one model call; status is "ok", an HTTP status code,
// "error" or "canceled".
func (m *Metrics) ModelCall(provider, model, status string, d time.Duration) {
	if m == nil {
		return
	}
	m.modelCalls.WithLabelValues(provider, model, status).Inc()
	m.modelDuration.WithLabelValues(provider, model).Observe(d.Seconds())
}

// Retry counts a model call about to be retried.
func (m *Metrics) Retry(provider, model string) {
	if m != nil {
		m.retries.WithLabelValues(provider, model).Inc()
	}
}

// Usage is what one model call consumed.
type Usage struct {
	Input, Output, Reasoning, CacheRead, CacheWrite int64
	Cost                                            float64
}

// Used records the tokens and cost of a step whose accounting committed.
func (m *Metrics) Used(provider, model string, u Usage) {
	if m == nil {
		return
	}
	for _, t := range []struct {
		typ string
		n   int64
	}{{"input", u.Input}, {"output", u.Output}, {"reasoning", u.Reasoning}, {"cache_read", u.CacheRead}, {"cache_write", u.CacheWrite}} {
		if t.n > 0 {
			m.tokens.WithLabelValues(provider, model, t.typ).Add(float64(t.n))
		}
	}
	if u.Cost > 0 {
		m.cost.WithLabelValues(provider, model).Add(u.Cost)
	}
}

// ToolCall records one tool call's result ("completed" or "error") and how
// long it ran.
func (m *Metrics) ToolCall(tool, result string, d time.Duration) {
	if m == nil {
		return
	}
	m.toolCalls.WithLabelValues(tool, result).Inc()
	m.toolDuration.WithLabelValues(tool).Observe(d.Seconds())
}

// StoreTx records one write transaction.
func (m *Metrics) StoreTx(d time.Duration, err error) {
	if m == nil {
		return
	}
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.storeTx.WithLabelValues(result).Observe(d.Seconds())
}

// CommitBatch records how many transactions shared one commit.
func (m *Metrics) CommitBatch(n int) {
	if m != nil {
		m.commitBatch.Observe(float64(n))
	}
}

// State is what the scrape-time gauges read: the store's view of the
// shared state and the event hub's counters.
type State interface {
	// ActiveRuns counts the non-terminal runs by state and phase.
	ActiveRuns(ctx context.Context) (map[[2]string]int, error)
	// PendingPermissions counts the unanswered permission requests.
	PendingPermissions(ctx context.Context) (int, error)
	// EventLog returns the first retained and the last assigned seq.
	EventLog(ctx context.Context) (first, last int64, err error)
	// Subscribers counts the open event streams; Delivered and Dropped the
	// events those streams sent and the live-only ones dropped for slow
	// clients.
	Subscribers() int
	Delivered() int64
	Dropped() int64
}

// NewStateCollector returns the collector of the scrape-time gauges. Each
// scrape reads the store (three indexed queries), bounded by timeout.
func NewStateCollector(s State, timeout time.Duration) prometheus.Collector {
	return &stateCollector{s: s, timeout: timeout,
		active: prometheus.NewDesc("agentd_runs_active", "Non-terminal runs in the store, by state and phase.",
			[]string{"state", "phase"}, nil),
		pending: prometheus.NewDesc("agentd_permission_requests_pending", "Permission requests waiting for an answer.", nil, nil),
		seq:     prometheus.NewDesc("agentd_event_log_seq", "The last seq assigned in the durable event log.", nil, nil),
		size:    prometheus.NewDesc("agentd_event_log_events", "Events retained in the durable event log.", nil, nil),
		subs:    prometheus.NewDesc("agentd_sse_subscribers", "Open event streams on this node.", nil, nil),
		sent:    prometheus.NewDesc("agentd_sse_events_delivered_total", "Events this node's streams sent to clients.", nil, nil),
		dropped: prometheus.NewDesc("agentd_sse_events_dropped_total",
			"Live-only events (text deltas) dropped for clients too slow to take them; durable events are never dropped.", nil, nil),
	}
}

type stateCollector struct {
	s                                               State
	timeout                                         time.Duration
	active, pending, seq, size, subs, sent, dropped *prometheus.Desc
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.active, c.pending, c.seq, c.size, c.subs, c.sent, c.dropped} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	if runs, err := c.s.ActiveRuns(ctx); err != nil {
		ch <- prometheus.NewInvalidMetric(c.active, err)
	} else {
		// The common states at zero, so that the gauge exists when no run
		// is active.
		for _, k := range [][2]string{{string(core.RunQueued), ""}, {string(core.RunRunning), ""}, {string(core.RunRetrying), ""}} {
			if _, ok := runs[k]; !ok {
				ch <- prometheus.MustNewConstMetric(c.active, prometheus.GaugeValue, 0, k[0], k[1])
			}
		}
		for k, n := range runs {
			ch <- prometheus.MustNewConstMetric(c.active, prometheus.GaugeValue, float64(n), k[0], k[1])
		}
	}
	if n, err := c.s.PendingPermissions(ctx); err != nil {
		ch <- prometheus.NewInvalidMetric(c.pending, err)
	} else {
		ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(n))
	}
	if first, last, err := c.s.EventLog(ctx); err != nil {
		ch <- prometheus.NewInvalidMetric(c.seq, err)
	} else {
		ch <- prometheus.MustNewConstMetric(c.seq, prometheus.GaugeValue, float64(last))
		ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(max(0, last-first+1)))
	}
	ch <- prometheus.MustNewConstMetric(c.subs, prometheus.GaugeValue, float64(c.s.Subscribers()))
	ch <- prometheus.MustNewConstMetric(c.sent, prometheus.CounterValue, float64(c.s.Delivered()))
	ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.CounterValue, float64(c.s.Dropped()))
}
