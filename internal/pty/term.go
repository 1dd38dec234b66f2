package pty

import (
	"errors"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/agentd/agentd/internal/sandbox"
	"github.com/agentd/agentd/internal/tool/builtin"
)

// term is one terminal: its shell, the master side of its
// pseudo-terminal, its container and its output.
type term struct {
	dir     string
	master  *os.File
	cmd     *exec.Cmd
	box     *builtin.Container
	release func()
	out     *ring

	readDone chan struct{} // the reader has stopped
	exited   chan struct{} // the shell was waited for, what it started killed, the output closed

	mu   sync.Mutex // guards info
	info Info
}

// defaultSize is a terminal's size until a client says its own.
var defaultSize = Size{Rows: 24, Cols: 80}

// readChunk is the most read from a terminal at once.
const readChunk = 32 << 10

// spawn starts the shell of s in a new pseudo-terminal, in its container
// and the sandbox, and the goroutines that read its output and wait for
// its end.
func (m *Manager) spawn(s spec) (*term, error) {
	master, tty, err := openPair(defaultSize)
	if err != nil {
		return nil, err
	}
	defer tty.Close() // the shell has its own copies once started
	box := builtin.Contain(m.cfg.Scope, s.id)
	cmd := exec.Command(s.path, s.args...)
	cmd.Dir = s.cwd
	cmd.Env = m.env(box, s.env)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = sessionAttr(box.Attr())
	release, err := m.cfg.Sandbox.Wrap(cmd, sandbox.Spec{Dir: s.dir})
	if err != nil {
		master.Close()
		box.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		release()
		master.Close()
		box.Close()
		return nil, inputErr("start %s: %v", s.path, err)
	}
	t := &term{dir: s.dir, master: master, cmd: cmd, box: box, release: release, out: newRing(m.cfg.Buffer),
		readDone: make(chan struct{}), exited: make(chan struct{}),
		info: Info{ID: s.id, Title: s.title, Command: s.path, Args: s.args, Cwd: s.cwd, Status: StatusRunning, Pid: cmd.Process.Pid}}
	m.procs.Add(2)
	go func() {
		defer m.procs.Done()
		t.read()
	}()
	go func() {
		defer m.procs.Done()
		m.wait(t)
	}()
	return t, nil
}

// env is a terminal's environment: the tools' (the server's allow-listed
// variables), the client's, what a terminal program expects, and the
// container's marker last, which nothing before it can replace.
func (m *Manager) env(box *builtin.Container, client []string) []string {
	env := box.Env(m.cfg.Env)
	marker := env[len(env)-1]
	env = append(env[:len(env)-1], client...)
	env = append(env, "TERM=xterm-256color", "COLORTERM=truecolor", "OPENCODE_TERMINAL=1", marker)
	return dedupe(env)
}

// dedupe keeps the last value of each variable.
func dedupe(env []string) []string {
	last := map[string]int{}
	for i, kv := range env {
		last[name(kv)] = i
	}
	out := env[:0:0]
	for i, kv := range env {
		if last[name(kv)] == i {
			out = append(out, kv)
		}
	}
	return out
}

func name(kv string) string {
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			return kv[:i]
		}
	}
	return kv
}

// read copies the terminal's output into the ring until the terminal is
// closed or no process holds it any more.
func (t *term) read() {
	defer close(t.readDone)
	buf := make([]byte, readChunk)
	for {
		n, err := t.master.Read(buf)
		if n > 0 {
			t.out.write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// wait waits for the shell, kills what it left running, reads what is
// left of the output, and releases the terminal's resources.
func (m *Manager) wait(t *term) {
	_ = t.cmd.Wait()
	code := exitCode(t.cmd.ProcessState)
	t.box.Kill()
	timer := time.NewTimer(drainGrace)
	select {
	case <-t.readDone:
	case <-timer.C:
		_ = t.master.SetReadDeadline(time.Now())
		<-t.readDone
	}
	timer.Stop()
	t.out.close()
	t.master.Close()
	t.box.Close()
	t.release()
	// The status says exited once everything above is done, as exited
	// does.
	t.mu.Lock()
	t.info.Status = StatusExited
	t.info.ExitCode = &code
	t.mu.Unlock()
	close(t.exited)
	m.log.Info("terminal exited", "id", t.info.ID, "code", code)
	m.notify("pty.exited", map[string]any{"id": t.info.ID, "exitCode": code})
}

// kill ends the shell and everything it started. The process group is
// signalled only while the shell has not been waited for: its number may
// since have been given to another.
func (t *term) kill() {
	if !t.exitedNow() {
		_ = syscall.Kill(-t.info.Pid, syscall.SIGKILL)
	}
	t.box.Kill()
}

// snapshot is a copy of the terminal's description.
func (t *term) snapshot() Info {
	t.mu.Lock()
	defer t.mu.Unlock()
	info := t.info
	info.Args = append([]string{}, t.info.Args...)
	if t.info.ExitCode != nil {
		c := *t.info.ExitCode
		info.ExitCode = &c
	}
	return info
}

// exitedNow reports whether the shell has ended.
func (t *term) exitedNow() bool {
	select {
	case <-t.exited:
		return true
	default:
		return false
	}
}

// resize sets the terminal's size; an exited terminal keeps its own.
func (t *term) resize(s Size) error {
	if t.exitedNow() {
		return nil
	}
	if err := resize(t.master, s); err != nil && !errors.Is(err, os.ErrClosed) {
		return err
	}
	return nil
}

// write types data into the terminal; an exited one takes nothing.
func (t *term) write(data []byte) error {
	if t.exitedNow() {
		return nil
	}
	if _, err := t.master.Write(data); err != nil && !errors.Is(err, os.ErrClosed) && !errors.Is(err, syscall.EIO) {
		return err
	}
	return nil
}
