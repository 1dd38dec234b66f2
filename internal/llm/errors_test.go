package llm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		h    map[string]string
		want time.Duration
	}{
		{map[string]string{"Retry-After": "3"}, 3 * time.Second},
		{map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond},
		{map[string]string{"retry-after-ms": "250", "Retry-After": "9"}, 250 * time.Millisecond},
		{map[string]string{"Retry-After": now.Add(20 * time.Second).Format(http.TimeFormat)}, 20 * time.Second},
		{map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, 0},
		{map[string]string{"Retry-After": "soon"}, 0},
		{map[string]string{"Retry-After": "-4"}, 0},
		{nil, 0},
	} {
		h := http.Header{}
		for k, v := range c.h {
			h.Set(k, v)
		}
		if got := RetryAfter(h, now); got != c.want {
			t.Errorf("RetryAfter(%v) = %v, want %v", c.h, got, c.want)
		}
	}
}

func TestClassification(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, c := range []struct {
		status          int
		retryable, auth bool
	}{
		{400, false, false}, {401, false, true}, {403, false, true}, {404, false, false},
		{408, true, false}, {429, true, false}, {500, true, false}, {503, true, false}, {529, true, false},
	} {
		e := FromHTTP(c.status, "", nil, "", now)
		if e.Retryable != c.retryable || e.Auth != c.auth || e.Message != http.StatusText(c.status) {
			t.Errorf("%d: %+v", c.status, e)
		}
	}
	h := http.Header{}
	h.Set("x-should-retry", "true")
	if e := FromHTTP(400, "x", h, "", now); !e.Retryable || e.Headers["x-should-retry"] != "true" {
		t.Errorf("x-should-retry not honoured: %+v", e)
	}
	if e := FromHTTP(400, "x", nil, `{"error":{"type":"overloaded_error"}}`, now); !e.Retryable {
		t.Error("overloaded body not retryable")
	}
	var ae *APIError
	if err := FromTransport(fmt.Errorf("read: %w", errors.New("connection reset by peer"))); !errors.As(err, &ae) || !ae.Retryable {
		t.Errorf("transport error = %v", err)
	}
	if err := FromTransport(context.Canceled); !errors.Is(err, context.Canceled) {
		t.Errorf("cancellation must stay a cancellation, got %v", err)
	}
}
