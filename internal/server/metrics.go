package server

import (
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) *apiError {
	s.cfg.Metrics.ServeHTTP(w, r)
	return nil
}

// traced wraps a route's handler in a server span named by its method and
// pattern, continuing the client's trace when the request carries W3C
// trace context. The engine links the span of a run to the span of the
// request that admitted it.
func (s *Server) traced(rt route, h func(w http.ResponseWriter, r *http.Request) *apiError) func(w http.ResponseWriter, r *http.Request) *apiError {
	if s.cfg.Tracer == nil {
		return h
	}
	name := rt.method + " " + rt.pattern
	return func(w http.ResponseWriter, r *http.Request) *apiError {
		ctx := propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := s.cfg.Tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
			attribute.String("http.request.method", r.Method), attribute.String("http.route", rt.pattern),
			attribute.String("url.path", r.URL.Path)))
		defer span.End()
		e := h(w, r.WithContext(ctx))
		if e != nil {
			span.SetAttributes(attribute.String("http.response.status_code", strconv.Itoa(e.status)))
			if e.status >= 500 {
				span.SetStatus(codes.Error, e.msg)
			}
		}
		return e
	}
}
