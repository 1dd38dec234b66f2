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
//
// The package writes Prometheus's text format itself (expo.go) and reads
// the Go runtime's and the process's figures itself (process.go), under
// client_golang's names and in its bytes: the client library's packages
// ran their initialisation at every start of every agentd command.
package metrics

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/agentd/agentd/internal/core"
)

// Metrics records one node's activity. Its methods are safe for
// concurrent use and do nothing on a nil receiver.
type Metrics struct {
	reg registry

	runsStarted   *series
	runsEnded     *family
	runDuration   *family
	runSteps      *family
	recovered     *family
	modelCalls    *family
	modelDuration *family
	retries       *family
	tokens        *family
	cost          *family
	toolCalls     *family
	toolDuration  *family
	storeTx       *family
	commitBatch   *family
	http          httpMetrics
	buildInfo     sync.Once
}

// New returns the node's metrics, with the Go runtime's and the process's
// figures (go_*, process_*) read at each scrape.
func New() *Metrics {
	m := &Metrics{}
	started := newFamily("agentd_runs_started_total",
		"Runs admitted on this node (a run counts once, when the prompt that starts it is accepted).", counterKind, nil)
	m.runsStarted = started.with()
	m.runsEnded = newFamily("agentd_runs_ended_total", "Runs this node ended, by outcome and reason.", counterKind, nil, "outcome", "reason")
	m.runDuration = newFamily("agentd_run_duration_seconds", "Time from a run's admission to its end, by outcome.", histogramKind,
		[]float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600}, "outcome")
	m.runSteps = newFamily("agentd_run_steps", "Model steps a run took, by outcome.", histogramKind,
		[]float64{0, 1, 2, 3, 5, 8, 13, 21, 34, 50, 100}, "outcome")
	m.recovered = newFamily("agentd_recovery_runs_total",
		"Runs found unfinished when this node started, by what recovery did with them.", counterKind, nil, "action")
	m.modelCalls = newFamily("agentd_model_calls_total",
		"Model calls, by provider, model and result (ok, an HTTP status code, error or canceled).", counterKind, nil,
		"provider", "model", "status")
	m.modelDuration = newFamily("agentd_model_call_duration_seconds", "Time from a model call's request to the end of its stream.",
		histogramKind, []float64{.05, .1, .25, .5, 1, 2, 4, 8, 15, 30, 60, 120, 300}, "provider", "model")
	m.retries = newFamily("agentd_model_retries_total", "Model calls retried after a retryable failure, by provider and model.",
		counterKind, nil, "provider", "model")
	m.tokens = newFamily("agentd_model_tokens_total",
		"Tokens the providers counted, by provider, model and type (input, output, reasoning, cache_read, cache_write).",
		counterKind, nil, "provider", "model", "type")
	m.cost = newFamily("agentd_model_cost_dollars_total",
		"What the model calls cost, in dollars, by provider and model (from the configured or built-in prices).",
		counterKind, nil, "provider", "model")
	m.toolCalls = newFamily("agentd_tool_calls_total",
		"Tool calls, by tool and result (completed or error; a refused permission is an error).", counterKind, nil, "tool", "result")
	m.toolDuration = newFamily("agentd_tool_call_duration_seconds", "Time a tool call ran, by tool.", histogramKind,
		[]float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 30, 60, 120, 600}, "tool")
	m.storeTx = newFamily("agentd_store_transaction_duration_seconds",
		"Time a write transaction took from its call to its durable commit, by result (ok or error).", histogramKind,
		[]float64{.0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 5}, "result")
	m.commitBatch = newFamily("agentd_store_commit_batch_size", "Transactions that shared one durable commit (SQLite's group commit).",
		histogramKind, []float64{1, 2, 4, 8, 16, 32, 64, 128, 256})
	m.commitBatch.with() // a series without labels exists from the start
	m.reg.add(started, m.runsEnded, m.runDuration, m.runSteps, m.recovered, m.modelCalls, m.modelDuration, m.retries,
		m.tokens, m.cost, m.toolCalls, m.toolDuration, m.storeTx, m.commitBatch)
	m.http = newHTTPMetrics(&m.reg)
	m.reg.addCollector(runtimeCollector{})
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
	core.RunInterrupted: {core.ReasonAborted, core.ReasonServerRestart, core.ReasonSuperseded, core.ReasonRejected, core.ReasonAskTimeout},
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
			m.runsEnded.with(string(outcome), string(r))
		}
		m.runDuration.with(string(outcome))
		m.runSteps.with(string(outcome))
	}
	for _, a := range []string{"resumed", "interrupted", "failed", "queued", "paused"} {
		m.recovered.with(a)
	}
	for _, pm := range k.Models {
		m.modelCalls.with(pm[0], pm[1], "ok")
		m.modelDuration.with(pm[0], pm[1])
		m.retries.with(pm[0], pm[1])
		for _, t := range []string{"input", "output", "reasoning", "cache_read", "cache_write"} {
			m.tokens.with(pm[0], pm[1], t)
		}
		m.cost.with(pm[0], pm[1])
	}
	for _, t := range k.Tools {
		m.toolCalls.with(t, core.ToolCompleted)
		m.toolCalls.with(t, core.ToolError)
		m.toolDuration.with(t)
	}
	m.storeTx.with("ok")
	m.storeTx.with("error")
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
	m.reg.addCollector(collectorFunc(func() []snapshot {
		return []snapshot{
			gauge("agentd_store_tx_waiting", "Write transactions waiting for the committer (SQLite's one writer).", float64(w.Waiting())),
			counter("agentd_store_committer_busy_seconds_total",
				"Time the committer (SQLite's one writer) spent committing; its rate is the writer's busy share.", w.BusySeconds()),
		}
	}))
}

// collectorFunc is a Collector written as a function.
type collectorFunc func() []snapshot

// Collect calls f.
func (f collectorFunc) Collect() []snapshot { return f() }

// Register adds collectors (the store's and the hub's gauges) to the
// metrics read at each scrape.
func (m *Metrics) Register(cs ...Collector) {
	if m == nil {
		return
	}
	m.reg.addCollector(cs...)
}

// Handler serves the metrics in Prometheus's text format.
func (m *Metrics) Handler() http.Handler {
	return m.reg.handler()
}

// RunStarted counts a run admitted.
func (m *Metrics) RunStarted() {
	if m != nil {
		m.runsStarted.add(1)
	}
}

// RunEnded counts a run's end.
func (m *Metrics) RunEnded(outcome core.RunState, reason core.EndReason, d time.Duration, steps int) {
	if m == nil {
		return
	}
	m.runsEnded.add(1, string(outcome), string(reason))
	m.runDuration.observe(d.Seconds(), string(outcome))
	m.runSteps.observe(float64(steps), string(outcome))
}

// Recovered counts a run found unfinished at start, by what was done.
func (m *Metrics) Recovered(action string) {
	if m != nil {
		m.recovered.add(1, action)
	}
}

// ModelCall records one model call; status is "ok", an HTTP status code,
// "error" or "canceled".
func (m *Metrics) ModelCall(provider, model, status string, d time.Duration) {
	if m == nil {
		return
	}
	m.modelCalls.add(1, provider, model, status)
	m.modelDuration.observe(d.Seconds(), provider, model)
}

// Retry counts a model call about to be retried.
func (m *Metrics) Retry(provider, model string) {
	if m != nil {
		m.retries.add(1, provider, model)
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
			m.tokens.add(float64(t.n), provider, model, t.typ)
		}
	}
	if u.Cost > 0 {
		m.cost.add(u.Cost, provider, model)
	}
}

// ToolCall records one tool call's result ("completed" or "error") and how
// long it ran.
func (m *Metrics) ToolCall(tool, result string, d time.Duration) {
	if m == nil {
		return
	}
	m.toolCalls.add(1, tool, result)
	m.toolDuration.observe(d.Seconds(), tool)
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
	m.storeTx.observe(d.Seconds(), result)
}

// CommitBatch records how many transactions shared one commit.
func (m *Metrics) CommitBatch(n int) {
	if m != nil {
		m.commitBatch.observe(float64(n))
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
func NewStateCollector(s State, timeout time.Duration) Collector {
	return &stateCollector{s: s, timeout: timeout}
}

type stateCollector struct {
	s       State
	timeout time.Duration
}

// Collect reads the store and the hub; a figure the store could not give
// is left out of this scrape.
func (c *stateCollector) Collect() []snapshot {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	var out []snapshot
	if runs, err := c.s.ActiveRuns(ctx); err == nil {
		var samples []sample
		// The common states at zero, so that the gauge exists when no run
		// is active.
		for _, k := range [][2]string{{string(core.RunQueued), ""}, {string(core.RunRunning), ""}, {string(core.RunRetrying), ""}} {
			if _, ok := runs[k]; !ok {
				samples = append(samples, sample{values: []string{k[0], k[1]}})
			}
		}
		for k, n := range runs {
			samples = append(samples, sample{values: []string{k[0], k[1]}, value: float64(n)})
		}
		out = append(out, constFamily("agentd_runs_active", "Non-terminal runs in the store, by state and phase.", gaugeKind,
			[]string{"state", "phase"}, samples...))
	}
	if n, err := c.s.PendingPermissions(ctx); err == nil {
		out = append(out, gauge("agentd_permission_requests_pending", "Permission requests waiting for an answer.", float64(n)))
	}
	if first, last, err := c.s.EventLog(ctx); err == nil {
		out = append(out,
			gauge("agentd_event_log_seq", "The last seq assigned in the durable event log.", float64(last)),
			gauge("agentd_event_log_events", "Events retained in the durable event log.", float64(max(0, last-first+1))))
	}
	return append(out,
		gauge("agentd_sse_subscribers", "Open event streams on this node.", float64(c.s.Subscribers())),
		counter("agentd_sse_events_delivered_total", "Events this node's streams sent to clients.", float64(c.s.Delivered())),
		counter("agentd_sse_events_dropped_total",
			"Live-only events (text deltas) dropped for clients too slow to take them; durable events are never dropped.", float64(c.s.Dropped())))
}
