package tracing

import (
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestEnabled(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}, false},
	} {
		if got := Enabled(env(c.env)); got != c.want {
			t.Errorf("Enabled(%v) = %v, want %v", c.env, got, c.want)
		}
	}
}

func TestEnvExporter(t *testing.T) {
	t.Parallel()
	type got struct {
		Endpoint string
		Headers  http.Header
		Gzip     bool
		Timeout  time.Duration
	}
	for _, c := range []struct {
		env     map[string]string
		want    got
		wantErr bool
	}{
		{env: nil, want: got{Endpoint: "http://localhost:4318/v1/traces", Headers: http.Header{}, Timeout: 10 * time.Second}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c:4318/", "OTEL_EXPORTER_OTLP_HEADERS": "api-key=a%20b, x=1,bad",
			"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip", "OTEL_EXPORTER_OTLP_TIMEOUT": "2500"},
			want: got{Endpoint: "https://c:4318/v1/traces", Headers: http.Header{"Api-Key": {"a b"}, "X": {"1"}}, Gzip: true, Timeout: 2500 * time.Millisecond}},
		// The traces-specific variables win, and their endpoint is used as given.
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:1", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b:2/custom",
			"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "none"},
			want: got{Endpoint: "http://b:2/custom", Headers: http.Header{}, Timeout: 10 * time.Second}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "c:4318"}, wantErr: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "10s"}, wantErr: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"}, wantErr: true},
	} {
		e, err := envExporter(env(c.env))
		if c.wantErr {
			if err == nil {
				t.Errorf("envExporter(%v): no error", c.env)
			}
			continue
		}
		if err != nil {
			t.Errorf("envExporter(%v): %v", c.env, err)
			continue
		}
		h := http.Header{}
		for k, v := range e.headers {
			h[http.CanonicalHeaderKey(k)] = v
		}
		if d := cmp.Diff(c.want, got{e.endpoint, h, e.gzip, e.client.Timeout}); d != "" {
			t.Errorf("envExporter(%v) (-want +got):\n%s", c.env, d)
		}
	}
}

// TestExportGzipWithHeaders sends spans through the SDK to a receiver that
// decodes them as a collector would.
func TestExportGzipWithHeaders(t *testing.T) {
	t.Parallel()
	type received struct {
		auth  string
		spans []*tracepb.Span
	}
	ch := make(chan received, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		b, _ := io.ReadAll(zr)
		var td tracepb.TracesData
		if err := proto.Unmarshal(b, &td); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		var spans []*tracepb.Span
		for _, rs := range td.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				spans = append(spans, ss.Spans...)
			}
		}
		ch <- received{r.Header.Get("Authorization"), spans}
	}))
	defer srv.Close()
	e, err := envExporter(env(map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": srv.URL + "/v1/traces",
		"OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%20t", "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"}))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(e))
	ctx, parent := tp.Tracer("t").Start(context.Background(), "parent")
	_, child := tp.Tracer("t").Start(ctx, "child")
	child.SetStatus(codes.Error, "broke")
	child.End()
	got := <-ch
	parent.End()
	<-ch
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got.auth != "Bearer t" || len(got.spans) != 1 {
		t.Fatalf("received %q, %d spans", got.auth, len(got.spans))
	}
	s := got.spans[0]
	psc := parent.SpanContext()
	pid := psc.SpanID()
	if s.Name != "child" || string(s.ParentSpanId) != string(pid[:]) || s.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || s.Status.GetMessage() != "broke" {
		t.Errorf("span = %v", s)
	}
}

func TestAttributeValues(t *testing.T) {
	t.Parallel()
	// Wrapped as a Resource's attributes (field 1) to decode them.
	b := keyValues(nil, 1, []attribute.KeyValue{attribute.String("s", "x"), attribute.Int("i", 3), attribute.Bool("b", true),
		attribute.Float64("f", 1.5), attribute.StringSlice("ss", []string{"a", "b"}), attribute.Int64Slice("is", []int64{1, 2}),
		attribute.Int("i0", 0), attribute.Bool("b0", false), attribute.String("s0", ""), attribute.Int("neg", -7)})
	var res resourcepb.Resource
	if err := proto.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	got := map[string]*commonpb.AnyValue{}
	for _, kv := range res.Attributes {
		got[kv.Key] = kv.Value
	}
	want := map[string]*commonpb.AnyValue{
		"s": {Value: &commonpb.AnyValue_StringValue{StringValue: "x"}},
		"i": {Value: &commonpb.AnyValue_IntValue{IntValue: 3}},
		"b": {Value: &commonpb.AnyValue_BoolValue{BoolValue: true}},
		"f": {Value: &commonpb.AnyValue_DoubleValue{DoubleValue: 1.5}},
		"ss": {Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: []*commonpb.AnyValue{
			{Value: &commonpb.AnyValue_StringValue{StringValue: "a"}}, {Value: &commonpb.AnyValue_StringValue{StringValue: "b"}}}}}},
		"is": {Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: []*commonpb.AnyValue{
			{Value: &commonpb.AnyValue_IntValue{IntValue: 1}}, {Value: &commonpb.AnyValue_IntValue{IntValue: 2}}}}}},
		// A oneof member is present at its zero value.
		"i0":  {Value: &commonpb.AnyValue_IntValue{IntValue: 0}},
		"b0":  {Value: &commonpb.AnyValue_BoolValue{BoolValue: false}},
		"s0":  {Value: &commonpb.AnyValue_StringValue{StringValue: ""}},
		"neg": {Value: &commonpb.AnyValue_IntValue{IntValue: -7}},
	}
	if len(got) != len(want) {
		t.Fatalf("%d attributes, want %d", len(got), len(want))
	}
	for k, w := range want {
		if !proto.Equal(w, got[k]) {
			t.Errorf("attribute %s = %v, want %v", k, got[k], w)
		}
	}
}

// TestWireMatchesGeneratedTypes encodes spans of every shape (kinds,
// statuses, events, links, trace state and flags, two scopes, every
// attribute type, equal resources of two providers and another resource)
// by hand and through the generated OTLP types, and
// requires the same message once decoded.
func TestWireMatchesGeneratedTypes(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	res := resource.NewWithAttributes("https://schema.example/1", attribute.String("service.name", "agentd"), attribute.Int("pid", 42))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithResource(res))
	defer tp.Shutdown(context.Background())
	attrs := []attribute.KeyValue{attribute.String("s", "x"), attribute.Int64("i", -3), attribute.Bool("b", false),
		attribute.Float64("f", 0), attribute.BoolSlice("bs", []bool{true, false}), attribute.Float64Slice("fs", []float64{1.5, -2}),
		attribute.StringSlice("ss", nil)}
	ts, _ := trace.ParseTraceState("vendor=value")
	linked := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2}, SpanID: trace.SpanID{3}, TraceState: ts,
		TraceFlags: trace.FlagsSampled})
	ctx, root := tp.Tracer("one", trace.WithInstrumentationVersion("v1")).Start(context.Background(), "root",
		trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...), trace.WithLinks(trace.Link{SpanContext: linked,
			Attributes: attrs[:2]}))
	root.AddEvent("ev", trace.WithAttributes(attrs[2:]...))
	root.AddEvent("")
	root.SetStatus(codes.Ok, "")
	_, child := tp.Tracer("two").Start(ctx, "child", trace.WithSpanKind(trace.SpanKindClient))
	child.SetStatus(codes.Error, "broke")
	child.End()
	_, plain := tp.Tracer("one", trace.WithInstrumentationVersion("v1")).Start(context.Background(), "")
	plain.End()
	// Spans of a resource equal to the first behind another pointer, and
	// of another resource.
	for _, r := range []*resource.Resource{
		resource.NewWithAttributes("https://schema.example/1", attribute.Int("pid", 42), attribute.String("service.name", "agentd")),
		resource.NewSchemaless(attribute.String("service.name", "other")),
	} {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithResource(r))
		defer tp.Shutdown(context.Background())
		_, s := tp.Tracer("two").Start(context.Background(), "elsewhere")
		s.End()
	}
	root.End()
	spans := rec.Ended()
	var got tracepb.TracesData
	if err := proto.Unmarshal(encodeTraces(spans), &got); err != nil {
		t.Fatal(err)
	}
	want := refTracesData(spans)
	if !proto.Equal(&got, want) {
		t.Errorf("decoded:\n%v\nwant:\n%v", &got, want)
	}
}
