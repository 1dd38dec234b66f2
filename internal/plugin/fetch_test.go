package plugin

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"
)

// waitFor polls cond until it holds, failing the test after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// stalled says whether the host has sent all it was granted (or the body
// ended): the moment a reader that is behind holds the most.
func (s *fetchStream) stalled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.received >= s.granted || s.err != nil
}

func (s *fetchStream) peakBuffered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}

// endless is a provider whose answer never ends; its handler's end (the
// client went away) closes gone.
func endless(t *testing.T) (url string, gone chan struct{}) {
	gone = make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(gone)
		chunk := bytes.Repeat([]byte("x"), 32<<10)
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, gone
}

// TestFetchFlowControl: a fetch's body read slower than the host sends it
// (the reader reads only once the host has sent all it may) holds at
// most the window on agentd's side, and arrives whole; a request
// cancelled while the host waits for credit aborts the plugin's fetch
// (the provider sees its client go), and a host that dies fails the body.
func TestFetchFlowControl(t *testing.T) {
	t.Parallel()
	h := startHost(t, Options{Backoff: 10 * time.Millisecond}, "twohooks.js")
	const window = 64 << 10
	h.fetchWindow = window
	body := make([]byte, 4<<20)
	for i := range body {
		body[i] = byte(i*7 + i>>11)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for b := body; len(b) > 0; b = b[min(len(b), 256<<10):] {
			_, _ = w.Write(b[:min(len(b), 256<<10)])
			w.(http.Flusher).Flush()
		}
	}))
	defer srv.Close()
	tr := &fetchTransport{h: h, dir: t.TempDir(), provider: "none"}

	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	res, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	s := res.Body.(*fetchStream)
	var got []byte
	buf := make([]byte, 16<<10)
	for {
		waitFor(t, "the host to send what it may", s.stalled)
		n, err := s.Read(buf)
		got = append(got, buf[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("after %d bytes: %v", len(got), err)
		}
	}
	res.Body.Close()
	if !bytes.Equal(got, body) {
		t.Errorf("the body arrived with %d bytes, not the %d sent (or changed)", len(got), len(body))
	}
	if p := s.peakBuffered(); p > window {
		t.Errorf("a slow reader's stream held %d bytes, more than its %d-byte window", p, window)
	}

	// Cancelled while the host waits for credit.
	url, gone := endless(t)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	res, err = tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	s = res.Body.(*fetchStream)
	waitFor(t, "the host to fill the window", s.stalled)
	cancel()
	select {
	case <-gone:
	case <-time.After(time.Minute):
		t.Fatal("the cancelled request's fetch still reads the provider's answer")
	}
	if _, err := io.ReadAll(res.Body); !errors.Is(err, context.Canceled) {
		t.Errorf("the cancelled body ended with %v", err)
	}
	res.Body.Close()

	// The host dies while a body streams.
	url, _ = endless(t)
	req, _ = http.NewRequest(http.MethodGet, url, nil)
	res, err = tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	s = res.Body.(*fetchStream)
	waitFor(t, "the host to fill the window", s.stalled)
	if err := syscall.Kill(-h.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(res.Body); err == nil || !strings.Contains(err.Error(), "host exited") {
		t.Errorf("a body whose host died ended with %v", err)
	}
	res.Body.Close()
}
