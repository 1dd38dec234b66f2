package tracing

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// exporter sends spans to an OTLP/HTTP endpoint as protobuf.
//
// It is agentd's own rather than the OpenTelemetry otlptracehttp module
// because that module imports gRPC (for the request type), and gRPC
// imports html/template, whose reflective method calls keep every
// exported method of every type in the binary: 54 MB more for the same
// bytes on the wire. The body is a TracesData message, which the OTLP
// specification makes wire-identical to ExportTraceServiceRequest.
type exporter struct {
	endpoint string
	headers  http.Header
	gzip     bool
	client   *http.Client
}

// envExporter reads the OTLP exporter variables: the endpoint (the
// signal-specific one is used as given, the general one gets /v1/traces),
// headers, timeout (milliseconds) and compression.
func envExporter(getenv func(string) string) (*exporter, error) {
	pick := func(name string) string {
		if v := getenv("OTEL_EXPORTER_OTLP_TRACES_" + name); v != "" {
			return v
		}
		return getenv("OTEL_EXPORTER_OTLP_" + name)
	}
	e := &exporter{headers: http.Header{}}
	switch {
	case getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "":
		e.endpoint = getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	case getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "":
		e.endpoint = strings.TrimSuffix(getenv("OTEL_EXPORTER_OTLP_ENDPOINT"), "/") + "/v1/traces"
	default:
		e.endpoint = "http://localhost:4318/v1/traces"
	}
	if u, err := url.Parse(e.endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("OTLP traces endpoint %q is not an http(s) URL", e.endpoint)
	}
	for _, kv := range strings.Split(pick("HEADERS"), ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		k, _ = url.QueryUnescape(strings.TrimSpace(k))
		v, _ = url.QueryUnescape(strings.TrimSpace(v))
		if k != "" {
			e.headers.Add(k, v)
		}
	}
	timeout := 10 * time.Second
	if t := pick("TIMEOUT"); t != "" {
		ms, err := strconv.Atoi(t)
		if err != nil || ms <= 0 {
			return nil, fmt.Errorf("OTLP timeout %q is not a positive number of milliseconds", t)
		}
		timeout = time.Duration(ms) * time.Millisecond
	}
	switch c := pick("COMPRESSION"); c {
	case "gzip":
		e.gzip = true
	case "", "none":
	default:
		return nil, fmt.Errorf("OTLP compression %q is neither gzip nor none", c)
	}
	e.client = &http.Client{Timeout: timeout}
	return e, nil
}

// ExportSpans implements sdktrace.SpanExporter.
func (e *exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	b, err := proto.Marshal(tracesData(spans))
	if err != nil {
		return fmt.Errorf("encode spans: %w", err)
	}
	if e.gzip {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write(b)
		_ = zw.Close()
		b = buf.Bytes()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.endpoint, bytes.NewReader(b))
	if err != nil {
		return err
	}
	for k, vs := range e.headers {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if e.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return fmt.Errorf("export %d spans: %w", len(spans), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("export %d spans: %s: %s", len(spans), resp.Status, bytes.TrimSpace(msg))
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return nil
}

// Shutdown implements sdktrace.SpanExporter.
func (e *exporter) Shutdown(context.Context) error {
	e.client.CloseIdleConnections()
	return nil
}

// tracesData groups spans by resource and instrumentation scope.
func tracesData(spans []sdktrace.ReadOnlySpan) *tracepb.TracesData {
	type scopeKey struct {
		res   string
		scope string
	}
	out := &tracepb.TracesData{}
	resources := map[string]*tracepb.ResourceSpans{}
	scopes := map[scopeKey]*tracepb.ScopeSpans{}
	for _, s := range spans {
		res := s.Resource()
		rk := res.Encoded(attribute.DefaultEncoder())
		rs := resources[rk]
		if rs == nil {
			rs = &tracepb.ResourceSpans{Resource: &resourcepb.Resource{Attributes: keyValues(res.Attributes())},
				SchemaUrl: res.SchemaURL()}
			resources[rk] = rs
			out.ResourceSpans = append(out.ResourceSpans, rs)
		}
		is := s.InstrumentationScope()
		sk := scopeKey{rk, is.Name + "\x00" + is.Version}
		ss := scopes[sk]
		if ss == nil {
			ss = &tracepb.ScopeSpans{Scope: &commonpb.InstrumentationScope{Name: is.Name, Version: is.Version},
				SchemaUrl: is.SchemaURL}
			scopes[sk] = ss
			rs.ScopeSpans = append(rs.ScopeSpans, ss)
		}
		ss.Spans = append(ss.Spans, span(s))
	}
	return out
}

func span(s sdktrace.ReadOnlySpan) *tracepb.Span {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	p := &tracepb.Span{
		TraceId: tid[:], SpanId: sid[:], TraceState: sc.TraceState().String(),
		Flags: uint32(sc.TraceFlags()), Name: s.Name(), Kind: tracepb.Span_SpanKind(s.SpanKind()),
		StartTimeUnixNano: uint64(s.StartTime().UnixNano()), EndTimeUnixNano: uint64(s.EndTime().UnixNano()),
		Attributes: keyValues(s.Attributes()), DroppedAttributesCount: uint32(s.DroppedAttributes()),
		DroppedEventsCount: uint32(s.DroppedEvents()), DroppedLinksCount: uint32(s.DroppedLinks()),
	}
	if s.SpanKind() == trace.SpanKindUnspecified {
		p.Kind = tracepb.Span_SPAN_KIND_INTERNAL
	}
	if parent := s.Parent(); parent.IsValid() {
		id := parent.SpanID()
		p.ParentSpanId = id[:]
	}
	for _, ev := range s.Events() {
		p.Events = append(p.Events, &tracepb.Span_Event{TimeUnixNano: uint64(ev.Time.UnixNano()), Name: ev.Name,
			Attributes: keyValues(ev.Attributes), DroppedAttributesCount: uint32(ev.DroppedAttributeCount)})
	}
	for _, l := range s.Links() {
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		p.Links = append(p.Links, &tracepb.Span_Link{TraceId: ltid[:], SpanId: lsid[:],
			TraceState: l.SpanContext.TraceState().String(), Flags: uint32(l.SpanContext.TraceFlags()),
			Attributes: keyValues(l.Attributes), DroppedAttributesCount: uint32(l.DroppedAttributeCount)})
	}
	switch st := s.Status(); st.Code {
	case codes.Error:
		p.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: st.Description}
	case codes.Ok:
		p.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_OK}
	}
	return p
}

func keyValues(kvs []attribute.KeyValue) []*commonpb.KeyValue {
	out := make([]*commonpb.KeyValue, 0, len(kvs))
	for _, kv := range kvs {
		out = append(out, &commonpb.KeyValue{Key: string(kv.Key), Value: anyValue(kv.Value)})
	}
	return out
}

func anyValue(v attribute.Value) *commonpb.AnyValue {
	switch v.Type() {
	case attribute.BOOL:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: v.AsBool()}}
	case attribute.INT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v.AsInt64()}}
	case attribute.FLOAT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v.AsFloat64()}}
	case attribute.BOOLSLICE:
		return array(v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		return array(v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		return array(v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		return array(v.AsStringSlice(), attribute.StringValue)
	}
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v.String()}}
}

// array converts a slice attribute element by element.
func array[T any](xs []T, value func(T) attribute.Value) *commonpb.AnyValue {
	vs := make([]*commonpb.AnyValue, 0, len(xs))
	for _, x := range xs {
		vs = append(vs, anyValue(value(x)))
	}
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vs}}}
}
