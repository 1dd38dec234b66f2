package app_test

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/tracing"
)

// otlpReceiver is a collector's OTLP/HTTP trace endpoint: it decodes what
// the exporter sends.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	attrs map[string]string // resource attributes seen
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want protobuf on /v1/traces", http.StatusBadRequest)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	for _, rs := range req.ResourceSpans {
		for _, kv := range rs.GetResource().GetAttributes() {
			o.attrs[kv.Key] = kv.GetValue().GetStringValue()
		}
		for _, ss := range rs.ScopeSpans {
			o.spans = append(o.spans, ss.Spans...)
		}
	}
	o.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

// TestTracesOverOTLP configures tracing only through the standard OTEL_*
// variables, sends a prompt carrying W3C trace context, and checks what a
// collector receives: the request's span in the caller's trace, a run span
// linked to it, steps under the run, the model calls and the tool call
// under their step.
func TestTracesOverOTLP(t *testing.T) {
	recv := &otlpReceiver{attrs: map[string]string{}}
	col := httptest.NewServer(recv)
	defer col.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.URL)
	t.Setenv("OTEL_SERVICE_NAME", "agentd-under-test")
	tp, err := tracing.FromEnv(t.Context(), "test")
	if err != nil || tp == nil {
		t.Fatalf("tracing from env: %v, %v", tp, err)
	}
	n := startNode(t, func(c *app.Config) { c.Tracer = tp.Tracer() })
	sid := n.session()

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	body := `{"parts":[{"type":"text","text":"tool:echo:{\"text\":\"traced\"}"}]}`
	req, _ := http.NewRequestWithContext(t.Context(), "POST", n.app.URL()+"/session/"+sid+"/message", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("prompt: %s", resp.Status)
	}
	n.waitIdle(sid)
	n.stop()
	if err := tp.Shutdown(t.Context()); err != nil {
		t.Fatalf("flush traces: %v", err)
	}

	recv.mu.Lock()
	defer recv.mu.Unlock()
	if recv.attrs["service.name"] != "agentd-under-test" || recv.attrs["service.version"] != "test" {
		t.Errorf("resource = %v", recv.attrs)
	}
	byName := map[string][]*tracepb.Span{}
	byID := map[string]*tracepb.Span{}
	for _, s := range recv.spans {
		byName[s.Name] = append(byName[s.Name], s)
		byID[hex.EncodeToString(s.SpanId)] = s
	}
	one := func(name string) *tracepb.Span {
		t.Helper()
		if len(byName[name]) != 1 {
			names := []string{}
			for n := range byName {
				names = append(names, n)
			}
			t.Fatalf("spans named %q: %d (have %v)", name, len(byName[name]), names)
		}
		return byName[name][0]
	}
	httpSpan := one("POST /session/{id}/message")
	if hex.EncodeToString(httpSpan.TraceId) != traceID || httpSpan.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("request span: trace %x kind %v, want the caller's trace %s, server", httpSpan.TraceId, httpSpan.Kind, traceID)
	}
	run := one("run")
	if len(run.Links) != 1 || !bytes.Equal(run.Links[0].SpanId, httpSpan.SpanId) || !bytes.Equal(run.Links[0].TraceId, httpSpan.TraceId) {
		t.Errorf("run span links = %v, want the admitting request's span", run.Links)
	}
	attr := func(s *tracepb.Span, key string) string {
		for _, kv := range s.Attributes {
			if kv.Key == key {
				return kv.GetValue().GetStringValue()
			}
		}
		return ""
	}
	if attr(run, "agentd.run.outcome") != "succeeded" || attr(run, "agentd.session.id") != sid {
		t.Errorf("run span attributes = %v", run.Attributes)
	}
	steps := byName["step"]
	if len(steps) != 2 {
		t.Fatalf("step spans = %d, want 2 (tool call, then answer)", len(steps))
	}
	for _, s := range steps {
		if !bytes.Equal(s.ParentSpanId, run.SpanId) {
			t.Errorf("step span's parent is not the run")
		}
	}
	chats := byName["chat scripted"]
	if len(chats) != 2 {
		t.Fatalf("model call spans = %d, want 2", len(chats))
	}
	for _, c := range chats {
		if p := byID[hex.EncodeToString(c.ParentSpanId)]; p == nil || p.Name != "step" {
			t.Errorf("model call span's parent is not a step")
		}
		if c.Kind != tracepb.Span_SPAN_KIND_CLIENT || attr(c, "gen_ai.provider.name") != "agentd" {
			t.Errorf("model call span: kind %v, attributes %v", c.Kind, c.Attributes)
		}
	}
	tool := one("execute_tool echo")
	if !bytes.Equal(tool.ParentSpanId, steps[0].SpanId) && !bytes.Equal(tool.ParentSpanId, steps[1].SpanId) {
		t.Errorf("tool span's parent is not a step")
	}
}
