package app_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/llm/scripted"
)

// scrape reads /metrics the way Prometheus does.
func (n *node) scrape() map[string]*dto.MetricFamily { return scrapeURL(n.t, n.app.URL()) }

func scrapeURL(tb testing.TB, url string) map[string]*dto.MetricFamily {
	tb.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("GET /metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		tb.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// value returns the value of the series of name whose labels include
// want (a counter, a gauge, or a histogram's count), summed over the
// series that match; ok is false when none does.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) (v float64, ok bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		for k, w := range want {
			if labels[k] != w {
				continue next
			}
		}
		ok = true
		switch {
		case m.Counter != nil:
			v += m.Counter.GetValue()
		case m.Gauge != nil:
			v += m.Gauge.GetValue()
		case m.Histogram != nil:
			v += float64(m.Histogram.GetSampleCount())
		}
	}
	return v, ok
}

// syncBuffer is a log sink the engine's goroutines can share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(s.b.Bytes()))
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// TestMetricsCountWhatHappened runs a scripted workload — three runs that
// succeed (one with a tool call), one whose provider answers 429 until the
// retries run out, one aborted while it waits for a permission to read outside the workspace, one
// resumed after a restart — and checks that /metrics and the run-end log
// lines say exactly that.
func TestMetricsCountWhatHappened(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	n := startNode(t, func(c *app.Config) { c.Logger = slog.New(slog.NewJSONHandler(logs, nil)) })
	ctx := t.Context()

	n.send(n.session(), "reply:one")
	n.send(n.session(), "reply:two")
	n.send(n.session(), `tool:echo:{"text":"three"}`)
	n.send(n.session(), "fail:429")

	asking := n.session()
	// Reading outside the workspace asks (external_directory).
	secret := outsideFile(t, "secret")
	if err := n.c.SendAsync(ctx, asking, client.Prompt{Text: `tool:read:{"filePath":"` + secret + `"}`}); err != nil {
		t.Fatal(err)
	}
	n.waitFor(asking, func(st core.SessionStatus) bool { return st.Phase == core.PhaseWaitingPermission })
	fams := n.scrape()
	if v, _ := value(fams, "agentd_permission_requests_pending", nil); v != 1 {
		t.Errorf("pending permissions = %v, want 1", v)
	}
	if v, _ := value(fams, "agentd_runs_active", map[string]string{"state": "running", "phase": "waiting_permission"}); v != 1 {
		t.Errorf("active running/waiting_permission = %v, want 1", v)
	}
	if _, err := n.c.Abort(ctx, asking); err != nil {
		t.Fatal(err)
	}
	n.waitIdle(asking)

	// The abort answers, and the session reads idle, once the store holds
	// the run ended; the node counts and logs an end just after its
	// commit, so the scrape waits for the count rather than racing it.
	deadline := time.Now().Add(10 * time.Second)
	for fams = n.scrape(); time.Now().Before(deadline); fams = n.scrape() {
		if v, _ := value(fams, "agentd_runs_ended_total", nil); v >= 5 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"agentd_runs_started_total", nil, 5},
		{"agentd_runs_ended_total", map[string]string{"outcome": "succeeded"}, 3},
		{"agentd_runs_ended_total", map[string]string{"outcome": "failed", "reason": "retries_exhausted"}, 1},
		{"agentd_runs_ended_total", map[string]string{"outcome": "interrupted", "reason": "aborted"}, 1},
		{"agentd_runs_ended_total", nil, 5},
		{"agentd_run_duration_seconds", map[string]string{"outcome": "succeeded"}, 3},
		{"agentd_run_steps", nil, 5},
		// fastRetry allows four attempts: four 429s, three retries.
		{"agentd_model_calls_total", map[string]string{"provider": "agentd", "model": "scripted", "status": "429"}, 4},
		{"agentd_model_retries_total", map[string]string{"provider": "agentd", "model": "scripted"}, 3},
		// reply, reply, echo's two steps, read's first step.
		{"agentd_model_calls_total", map[string]string{"status": "ok"}, 5},
		{"agentd_tool_calls_total", map[string]string{"tool": "echo", "result": "completed"}, 1},
		{"agentd_tool_call_duration_seconds", map[string]string{"tool": "echo"}, 1},
		{"agentd_permission_requests_pending", nil, 0},
		{"agentd_sse_subscribers", nil, 0},
	} {
		if got, _ := value(fams, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if v, ok := value(fams, "agentd_runs_active", nil); ok && v != 0 {
		t.Errorf("active runs after every run ended = %v", v)
	}
	for _, typ := range []string{"input", "output"} {
		if v, _ := value(fams, "agentd_model_tokens_total", map[string]string{"provider": "agentd", "type": typ}); v <= 0 {
			t.Errorf("%s tokens = %v, want > 0", typ, v)
		}
	}
	for _, name := range []string{"agentd_store_transaction_duration_seconds", "agentd_store_commit_batch_size", "agentd_event_log_events"} {
		if v, _ := value(fams, name, nil); v <= 0 {
			t.Errorf("%s = %v, want > 0", name, v)
		}
	}
	_, last, err := n.app.Store.EventBounds(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := value(fams, "agentd_event_log_seq", nil); v != float64(last) {
		t.Errorf("event log seq = %v, want %d", v, last)
	}
	// No session or run id is a label.
	for name, f := range fams {
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if strings.HasPrefix(l.GetValue(), "ses_") || strings.HasPrefix(l.GetValue(), "run_") {
					t.Errorf("%s has an id as a label: %s=%s", name, l.GetName(), l.GetValue())
				}
			}
		}
	}

	// One log line per run end, with what an operator looks for.
	var ended []map[string]any
	for ended = runEndLines(logs); len(ended) < 5 && time.Now().Before(deadline); ended = runEndLines(logs) {
		time.Sleep(10 * time.Millisecond) // logged just after it is counted
	}
	if len(ended) != 5 {
		t.Fatalf("run-end log lines = %d, want 5", len(ended))
	}
	outcomes := map[string]int{}
	for _, l := range ended {
		outcomes[l["outcome"].(string)+"/"+l["reason"].(string)]++
		for _, k := range []string{"run", "session", "duration", "steps", "tokens_input", "tokens_output", "cost", "model"} {
			if _, ok := l[k]; !ok {
				t.Errorf("run-end line lacks %s: %v", k, l)
			}
		}
	}
	if outcomes["succeeded/"] != 3 || outcomes["failed/retries_exhausted"] != 1 || outcomes["interrupted/aborted"] != 1 {
		t.Errorf("run-end outcomes = %v", outcomes)
	}
}

func runEndLines(logs *syncBuffer) []map[string]any {
	var ended []map[string]any
	for _, l := range logs.lines() {
		if l["msg"] == "run ended" {
			ended = append(ended, l)
		}
	}
	return ended
}

// TestMetricsCountRecovery restarts a node while a run executes: the new
// process counts the run it found and resumed.
func TestMetricsCountRecovery(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	sid := n.session()
	if err := n.c.SendAsync(t.Context(), sid, client.Prompt{Text: "sleep:30"}); err != nil {
		t.Fatal(err)
	}
	n.waitFor(sid, func(st core.SessionStatus) bool { return st.Type == core.StatusBusy })
	n = n.restart()
	fams := n.scrape()
	if v, _ := value(fams, "agentd_recovery_runs_total", map[string]string{"action": "resumed"}); v != 1 {
		t.Errorf("resumed at start = %v, want 1", v)
	}
	if _, err := n.c.Abort(t.Context(), sid); err != nil {
		t.Fatal(err)
	}
	n.waitIdle(sid)
}

// commits reads how many durable commits the node has made (each group
// commit is one fsync with synchronous=FULL).
func commits(tb testing.TB, url string) float64 {
	tb.Helper()
	v, _ := value(scrapeURL(tb, url), "agentd_store_commit_batch_size", nil)
	return v
}

// TestTwoCommitsPerQuickTurn pins the turn's durable writes: a turn whose
// model answers within the flush interval commits at admission and at its
// end, nothing in between; a tool call adds the commits that make its
// running state and its result durable.
func TestTwoCommitsPerQuickTurn(t *testing.T) {
	t.Parallel()
	// "Quick" is within the flush interval; a loaded machine must not
	// make this turn slow enough for the timer to commit in between
	// (TestSilentStepBecomesVisible pins the timer).
	n := startNode(t, func(c *app.Config) { c.Engine.FlushInterval = time.Minute })
	sid := n.session()
	n.send(sid, "title:Warm\nreply:warm up")
	n.waitTitle(sid, "Warm")
	before := commits(t, n.app.URL())
	m := n.send(sid, "reply:quick")
	if got := commits(t, n.app.URL()) - before; got != 2 {
		t.Errorf("commits for a quick turn = %v, want 2", got)
	}
	if textOf(m) != "quick" {
		t.Errorf("answer = %q", textOf(m))
	}
	// The transcript holds everything the turn produced.
	msgs, err := n.c.Messages(t.Context(), sid)
	if err != nil {
		t.Fatal(err)
	}
	last := msgs[len(msgs)-1]
	var types []string
	for _, p := range last.Parts {
		types = append(types, string(p.Type))
	}
	if strings.Join(types, ",") != "step-start,text,step-finish,idle" || last.Info.Completed == 0 || last.Info.Tokens.Output == 0 {
		t.Errorf("last message: parts %v, completed %d, tokens %+v", types, last.Info.Completed, last.Info.Tokens)
	}
	before = commits(t, n.app.URL())
	n.send(sid, `tool:echo:{"text":"x"}`)
	// Admission; the first step's end with the call running; the call's
	// result; the end (with the second step).
	if got := commits(t, n.app.URL()) - before; got != 4 {
		t.Errorf("commits for a one-tool turn = %v, want 4", got)
	}
}

// TestSilentStepBecomesVisible: writes that wait for the runner's next
// transaction are committed by the flush interval at the latest, even
// when the model sends nothing for a long time — a reader sees the step
// begin while the model is still silent. The model thinks for ten minutes
// before its first chunk, so that whatever the machine's load, seeing the
// step at all is seeing it during the silence (a one-second silence and a
// 0.8 s bound timed the machine: under load the step showed up late).
func TestSilentStepBecomesVisible(t *testing.T) {
	t.Parallel()
	n := startNode(t, func(c *app.Config) {
		models := llm.NewRegistry()
		// One "second" of think: is a real second.
		models.Add(scripted.ProviderID, &scripted.Model{Second: time.Second}, nil)
		c.Models = models
	})
	sid := n.session()
	if err := n.c.SendAsync(t.Context(), sid, client.Prompt{Text: "think:600\nreply:late"}); err != nil {
		t.Fatal(err)
	}
	n.waitTranscript(sid, func(msgs []core.MessageWithParts) bool {
		return len(msgs) == 2 && msgs[1].Info.Role == core.RoleAssistant && len(msgs[1].Parts) > 0
	})
	msgs, err := n.c.Messages(t.Context(), sid)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || len(msgs[1].Parts) != 1 || msgs[1].Parts[0].Type != core.PartStepStart {
		t.Fatalf("while the model is silent the transcript reads %+v", msgs)
	}
	if _, err := n.c.Abort(t.Context(), sid); err != nil {
		t.Fatal(err)
	}
	n.waitIdle(sid)
}

// TestEveryDocumentedMetricFromTheStart: each metric the operations guide
// (docs/operations.md) lists is
// on /metrics of a node that has done nothing yet (at zero), so that
// dashboards and rate() alerts see it from the first scrape.
func TestEveryDocumentedMetricFromTheStart(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(readme), "**Metrics.**")
	section, _, _ = strings.Cut(section, "**Traces.**")
	names := regexp.MustCompile("`(agentd_[a-z_]+)").FindAllStringSubmatch(section, -1)
	if len(names) < 20 {
		t.Fatalf("found %d metric names in docs/operations.md's metrics paragraph", len(names))
	}
	n := startNode(t)
	fams := n.scrape()
	for _, m := range names {
		f := fams[m[1]]
		if f == nil || len(f.Metric) == 0 {
			t.Errorf("%s is documented but not exported by a fresh node", m[1])
		}
	}
	if v, ok := value(fams, "agentd_tool_calls_total", map[string]string{"tool": "bash", "result": "completed"}); !ok || v != 0 {
		t.Errorf("agentd_tool_calls_total{tool=bash,result=completed} = %v (%v), want 0", v, ok)
	}
	if v, ok := value(fams, "agentd_runs_active", map[string]string{"state": "running"}); !ok || v != 0 {
		t.Errorf("agentd_runs_active{state=running} = %v (%v), want 0", v, ok)
	}
}
