package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// served is an `agentd serve` running in the background: its URL once it
// listens, and its log so far.
type served struct {
	t    *testing.T
	cmd  *exec.Cmd
	url  string
	mu   sync.Mutex
	log  strings.Builder
	done chan struct{}
	code int
	// listen is closed once the server logs its URL.
	listen chan struct{}
}

var listeningURL = regexp.MustCompile(`msg="agentd listening" url=(\S+)`)

// serve starts `agentd serve ARGS...` and waits until it listens; the
// test's end stops it.
func (c *cli) serve(args ...string) *served {
	c.t.Helper()
	s := c.startServe(args...)
	select {
	case <-s.listening():
	case <-s.done:
		c.t.Fatalf("agentd serve ended (exit %d):\n%s", s.code, s.logText())
	case <-time.After(time.Minute):
		c.t.Fatalf("agentd serve did not listen:\n%s", s.logText())
	}
	return s
}

// startServe starts `agentd serve ARGS...` without waiting for it.
func (c *cli) startServe(args ...string) *served {
	c.t.Helper()
	cmd := c.command(context.Background(), append([]string{"serve"}, args...)...)
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	s := &served{t: c.t, cmd: cmd, done: make(chan struct{})}
	listening := make(chan struct{})
	s.listen = listening
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.log.WriteString(line + "\n")
			if m := listeningURL.FindStringSubmatch(line); m != nil && s.url == "" {
				s.url = m[1]
				close(listening)
			}
			s.mu.Unlock()
		}
	}()
	go func() {
		_ = cmd.Wait() // the exit code says how it ended
		s.code = cmd.ProcessState.ExitCode()
		pw.Close()
		<-scanned
		close(s.done)
	}()
	c.t.Cleanup(func() { s.stop() })
	return s
}

func (s *served) listening() <-chan struct{} { return s.listen }

func (s *served) logText() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// stop sends SIGINT and waits for the process to end; it returns the
// exit code.
func (s *served) stop() int {
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
		<-s.done
	}
	return s.code
}
