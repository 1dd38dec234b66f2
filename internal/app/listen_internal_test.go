package app

import (
	"net"
	"strings"
	"testing"
	"time"
)

// TestListenOutwaitsABriefHolder pins that a port held for a moment by
// something that is not an agentd (a killed server's child between its
// fork and its exec) is tried again rather than refused, and that a port
// still held after the grace is refused with the reason.
func TestListenOutwaitsABriefHolder(t *testing.T) {
	t.Parallel()
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := held.Addr().(*net.TCPAddr).Port
	released := make(chan struct{})
	go func() {
		defer close(released)
		time.Sleep(300 * time.Millisecond) // the holder's moment, shorter than portGrace
		held.Close()
	}()
	ln, err := listen(Config{Host: "127.0.0.1", Port: port})
	<-released
	if err != nil {
		t.Fatalf("a port held for 300 ms: %v", err)
	}
	ln.Close()

	kept, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close()
	_, err = listen(Config{Host: "127.0.0.1", Port: kept.Addr().(*net.TCPAddr).Port})
	if err == nil || !strings.Contains(err.Error(), "another process holds it") {
		t.Fatalf("a port held throughout: got %v, want the reason", err)
	}
}
