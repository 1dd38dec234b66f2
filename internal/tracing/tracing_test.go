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
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
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
	kvs := keyValues([]attribute.KeyValue{attribute.String("s", "x"), attribute.Int("i", 3), attribute.Bool("b", true),
		attribute.Float64("f", 1.5), attribute.StringSlice("ss", []string{"a", "b"}), attribute.Int64Slice("is", []int64{1, 2})})
	got := map[string]*commonpb.AnyValue{}
	for _, kv := range kvs {
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
