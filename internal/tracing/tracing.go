// Package tracing sets up OpenTelemetry tracing from the standard OTEL_*
// environment variables. Tracing is off unless asked for: by
// OTEL_TRACES_EXPORTER=otlp, or by an OTLP endpoint variable
// (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT). Spans
// are exported over OTLP/HTTP (protobuf), the exporter reading its own
// variables (endpoint, headers, timeout, compression, certificates);
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES name the resource and
// OTEL_TRACES_SAMPLER chooses the sampler.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Provider is a tracer provider and the function that flushes and stops
// it (call it at shutdown, with a deadline).
type Provider struct {
	trace.TracerProvider
	Shutdown func(context.Context) error
}

// Enabled reports whether the environment asks for traces.
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	switch exp := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))); exp {
	case "none":
		return false
	case "otlp":
		return true
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// FromEnv returns the tracer provider the environment describes, or nil
// when tracing is off. version is recorded as service.version.
func FromEnv(ctx context.Context, version string) (*Provider, error) {
	if !Enabled(os.Getenv) {
		return nil, nil
	}
	proto := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if proto != "" && proto != "http/protobuf" {
		// gRPC would add a large dependency (see exporter) for a protocol
		// every collector also accepts over HTTP.
		return nil, fmt.Errorf("OTLP protocol %q is not supported; use http/protobuf (the collector's port 4318)", proto)
	}
	if e := strings.ToLower(os.Getenv("OTEL_TRACES_EXPORTER")); e != "" && e != "otlp" && e != "none" {
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%s is not supported; use otlp", e)
	}
	exp, err := envExporter(os.Getenv)
	if err != nil {
		return nil, err
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "agentd"), attribute.String("service.version", version)),
		resource.WithFromEnv(), resource.WithProcessPID(), resource.WithHost())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Provider{TracerProvider: tp, Shutdown: tp.Shutdown}, nil
}

// Tracer returns agentd's tracer from p, or nil when p is nil (tracing
// off).
func (p *Provider) Tracer() trace.Tracer {
	if p == nil {
		return nil
	}
	return p.TracerProvider.Tracer("github.com/agentd/agentd")
}
