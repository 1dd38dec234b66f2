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

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// exporter sends spans to an OTLP/HTTP endpoint as protobuf.
//
// It is agentd's own rather than the OpenTelemetry otlptracehttp module
// because that module imports gRPC (for the request type), and gRPC
// imports html/template, whose reflective method calls keep every
// exported method of every type in the binary: 54 MB more for the same
// bytes on the wire; and it encodes the protobuf itself (wire.go). The
// body is a TracesData message, which the OTLP
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
	b := encodeTraces(spans)
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
