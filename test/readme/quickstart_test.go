package readme_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/fakellm"
	"github.com/agentd/agentd/internal/testbin"
	"github.com/agentd/agentd/internal/testenv"
)

// TestQuickStart follows the README's quick start as a newcomer would, in a
// fresh home directory: the server, a first offline prompt through it, a
// real provider configured by the two lines the README gives, and a prompt
// whose permission is asked on the terminal and answered with a key. Only
// what cannot be real here is put in: the test's port instead of 4096, the
// fake provider's address (OPENAI_BASE_URL) instead of OpenAI's, and a
// directive the fake model obeys instead of a question a real one answers.
func TestQuickStart(t *testing.T) {
	t.Parallel()
	testenv.SkipShort(t)
	for _, tool := range []string{"bash", "tmux"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("AGENTD_README_REQUIRED") != "" {
				t.Fatalf("%s is not installed", tool)
			}
			testenv.Skip(t, testenv.Tmux, tool+" is not installed")
		}
	}
	src, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, qs, _ := strings.Cut(string(src), "## Quick start")
	qs, _, _ = strings.Cut(qs, "\n## ")
	const (
		serveCmd  = "agentd serve"
		hello     = `agentd run "reply:hello"`
		keyLine   = "export OPENAI_API_KEY="
		mkdirLine = "mkdir -p ~/.config/agentd"
		modelLine = `echo '{"model": "openai/gpt-4.1"}' > ~/.config/agentd/agentd.json`
		check     = "agentd config check"
		askPrompt = `agentd run "Which files are in this directory? Use ls."`
		askLine   = "[o]nce, [a]lways, [r]eject:"
	)
	for _, s := range []string{serveCmd, hello, keyLine, mkdirLine, modelLine, check, askPrompt, askLine} {
		if !strings.Contains(qs, s) {
			t.Fatalf("the quick start no longer says %q: change this test with it", s)
		}
	}

	bin := testbin.Agentd(t)
	home := t.TempDir()
	ws := filepath.Join(home, "project")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(ws, "notes-for-the-model.txt"), []byte("hi\n"), 0o644)
	fake := httptest.NewServer(fakellm.New(fakellm.Options{Second: 10 * time.Millisecond}).Handler())
	t.Cleanup(fake.Close)
	env := []string{"HOME=" + home, "PATH=" + filepath.Dir(bin) + ":" + os.Getenv("PATH"), "LANG=C.UTF-8", "TERM=xterm-256color"}
	port := freePort(t)

	// 1. The server.
	srv := startServe(t, bin, ws, env, port)
	// 2. A first prompt, offline, through that server.
	if out := sh(t, ws, env, hello); strings.TrimSpace(out) != "hello" {
		t.Fatalf("%s printed %q, want hello", hello, out)
	}
	// 3. A real model: the key and the default model, checked, then the
	// server again.
	srv.stop()
	env = append(env, "OPENAI_API_KEY=sk-test", "OPENAI_BASE_URL="+fake.URL+"/v1")
	sh(t, ws, env, mkdirLine+"\n"+modelLine)
	sh(t, ws, env, check)
	srv = startServe(t, bin, ws, env, port)
	srv.waitLog(t, "model default=openai/gpt-4.1")
	// 4. The permission, asked on a terminal and answered with one key.
	prompt := strings.Replace(askPrompt, "Which files are in this directory? Use ls.", `tool:bash:{\"command\":\"ls\"}`, 1)
	term := newTerminal(t, ws, env, prompt+"; echo EXIT=$?")
	term.waitFor(t, askLine)
	term.keys(t, "o")
	screen := term.waitFor(t, "EXIT=")
	if !strings.Contains(screen, "EXIT=0") || !strings.Contains(screen, "notes-for-the-model.txt") {
		t.Errorf("after the answer the terminal shows:\n%s", screen)
	}
}

// served is an agentd serve started by the quick start test.
type served struct {
	cmd  *exec.Cmd
	logs *syncWriter
	done chan struct{}
}

func startServe(t *testing.T, bin, dir string, env []string, port string) *served {
	t.Helper()
	s := &served{cmd: exec.Command(bin, "serve", "--port", port), logs: &syncWriter{b: &bytes.Buffer{}}, done: make(chan struct{})}
	s.cmd.Dir, s.cmd.Env, s.cmd.Stderr = dir, env, s.logs
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("agentd serve's log:\n%s", s.logs.String())
		}
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if r, err := http.Get("http://127.0.0.1:" + port + "/global/health"); err == nil {
			r.Body.Close()
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("agentd serve did not answer:\n%s", s.logs.String())
		}
	}
}

// stop interrupts the server, as Ctrl-C does, and waits for it to exit.
func (s *served) stop() {
	s.cmd.Process.Signal(os.Interrupt)
	<-s.done
}

func (s *served) waitLog(t *testing.T, want string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if strings.Contains(s.logs.String(), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server's log never said %q", want)
		}
	}
}

// sh runs a script of the quick start with bash and returns its stdout.
func sh(t *testing.T, dir string, env []string, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-c", script)
	cmd.Dir, cmd.Env = dir, env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\nstdout: %s\nstderr: %s", script, err, out, stderr.String())
	}
	return string(out)
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// terminal is a command running in a tmux pane of its own server.
type terminal struct{ socket string }

func newTerminal(t *testing.T, dir string, env []string, command string) *terminal {
	t.Helper()
	term := &terminal{socket: "agentd-quickstart-" + strconv.Itoa(os.Getpid())}
	cmd := exec.Command("tmux", "-L", term.socket, "new-session", "-d", "-s", "qs", "-x", "160", "-y", "50", "-c", dir,
		command+"; sleep 600")
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tmux: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("tmux", "-L", term.socket, "kill-server").Run() })
	return term
}

func (term *terminal) screen() string {
	out, _ := exec.Command("tmux", "-L", term.socket, "capture-pane", "-p", "-J", "-t", "qs", "-S", "-100").Output()
	return string(out)
}

func (term *terminal) waitFor(t *testing.T, want string) string {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if s := term.screen(); strings.Contains(s, want) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("the terminal never showed %q:\n%s", want, term.screen())
		}
	}
}

// keys types on the terminal: the key alone, then Enter for a prompt that
// reads a line.
func (term *terminal) keys(t *testing.T, key string) {
	t.Helper()
	if out, err := exec.Command("tmux", "-L", term.socket, "send-keys", "-t", "qs", key, "Enter").CombinedOutput(); err != nil {
		t.Fatalf("tmux send-keys: %v: %s", err, out)
	}
}

// syncWriter is a buffer written by a process's output copier and read by
// the test at once.
type syncWriter struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
