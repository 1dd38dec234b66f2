package tracing

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// BenchmarkEncodeTraces encodes a batch as the exporter sends it: 512
// spans of one process, whose resource carries what a deployment sets.
func BenchmarkEncodeTraces(b *testing.B) {
	rec := tracetest.NewSpanRecorder()
	res := resource.NewWithAttributes("https://schema.example/1", attribute.String("service.name", "agentd"),
		attribute.String("service.version", "1.0.0"), attribute.String("service.instance.id", "node-a"),
		attribute.String("host.name", "build-host-01"), attribute.Int("process.pid", 4242),
		attribute.String("deployment.environment", "production"), attribute.String("cloud.region", "eu-west-1"))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithResource(res))
	defer tp.Shutdown(context.Background())
	tr := tp.Tracer("agentd")
	for range 512 {
		_, s := tr.Start(context.Background(), "llm.call", trace.WithAttributes(attribute.String("model", "m"), attribute.Int("tokens", 100)))
		s.End()
	}
	spans := rec.Ended()
	b.ReportAllocs()
	for b.Loop() {
		encodeTraces(spans)
	}
}
