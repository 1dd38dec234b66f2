package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// bodyServer serves next behind readBody, with a short body deadline.
func bodyServer(t *testing.T, timeout time.Duration, next http.HandlerFunc) string {
	t.Helper()
	s := &Server{cfg: Config{BodyLimit: 1 << 20, BodyTimeout: timeout}}
	srv := httptest.NewServer(s.readBody(next))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// TestStalledBodyAnsweredAtDeadline: a client that sends its headers and
// part of its body, then stalls, gets a 400 once the body deadline passes
// (without it, it would hold the connection for as long as it likes), the
// handler never runs, and the connection is closed.
func TestStalledBodyAnsweredAtDeadline(t *testing.T) {
	t.Parallel()
	ran := make(chan struct{}, 1)
	addr := bodyServer(t, 200*time.Millisecond, func(w http.ResponseWriter, r *http.Request) { ran <- struct{}{} })
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /x HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"parts\":", addr)
	// Far beyond the deadline: a server without one never answers.
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "request body") {
		t.Errorf("answer = %d %s", resp.StatusCode, body)
	}
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("the connection stayed open after the stalled body")
	}
	select {
	case <-ran:
		t.Error("the handler ran on a body that never arrived")
	default:
	}
}

// TestBodyDeadlineLiftedForTheHandler: once the body is read, its deadline
// is lifted: a handler that waits longer than it (a prompt waiting for
// its run) is not cut off, and answers.
func TestBodyDeadlineLiftedForTheHandler(t *testing.T) {
	t.Parallel()
	const timeout = 100 * time.Millisecond
	cut := make(chan bool, 1)
	addr := bodyServer(t, timeout, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		// Long past the body's deadline, were it still on the connection.
		select {
		case <-r.Context().Done():
			cut <- true
			return
		case <-time.After(5 * timeout):
		}
		cut <- false
		fmt.Fprintf(w, "read %s", b)
	})
	resp, err := http.Post("http://"+addr+"/x", "application/json", strings.NewReader(`{"ok":true}`))
	if err != nil {
		t.Fatalf("a handler waiting past the body deadline: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if <-cut {
		t.Error("the handler's request was cancelled by the body's deadline")
	}
	if resp.StatusCode != http.StatusOK || string(body) != `read {"ok":true}` {
		t.Errorf("answer = %d %s", resp.StatusCode, body)
	}
}
