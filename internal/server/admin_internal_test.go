package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/tuictl"
)

// TestLogWindow: at most max lines a second; the next second starts anew.
func TestLogWindow(t *testing.T) {
	var w window
	t0 := time.Unix(1000, 0)
	for i := range 3 {
		if !w.allow(t0.Add(time.Duration(i)*time.Millisecond), 3) {
			t.Fatalf("line %d refused", i)
		}
	}
	if w.allow(t0.Add(900*time.Millisecond), 3) {
		t.Fatal("a fourth line in the same second was allowed")
	}
	if !w.allow(t0.Add(1100*time.Millisecond), 3) {
		t.Fatal("a line of the next second was refused")
	}
}

// TestClip: a long string is cut on a rune boundary and says how much.
func TestClip(t *testing.T) {
	if clip("short", 10) != "short" {
		t.Error("a short string changed")
	}
	got := clip(strings.Repeat("é", 10), 5) // 2 bytes each: cut at 4
	if !strings.HasPrefix(got, "éé…") || !strings.Contains(got, "(16 bytes cut)") {
		t.Errorf("clip = %q", got)
	}
}

// TestTUIPollEndsWithItsContext: a poller waiting for a TUI request is
// answered once its request's context ends (the server's base context is
// cancelled first when it stops), so it never holds a shutdown.
func TestTUIPollEndsWithItsContext(t *testing.T) {
	s := &Server{tui: tuictl.New(0, 0, nil)}
	ctx, cancel := context.WithCancel(t.Context())
	r := httptest.NewRequestWithContext(ctx, "GET", "/tui/control/next", nil)
	done := make(chan *apiError, 1)
	go func() { done <- s.tuiControlNext(httptest.NewRecorder(), r) }()
	cancel()
	if e := <-done; e == nil || e.status != http.StatusServiceUnavailable {
		t.Fatalf("a poll whose request ended: %+v, want 503", e)
	}
}
