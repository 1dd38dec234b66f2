// Package plugin runs opencode's plugins (the V1 API of
// @opencode-ai/plugin) for agentd: one Bun process per node, the host,
// started only when the configuration lists plugins, speaking
// newline-delimited JSON-RPC with the server; and Hooks, which the engine
// calls at opencode's call points. Every awaited call has a timeout, a
// host that dies is started again with backoff, and the calls it left
// unanswered fail with the reason.
package plugin

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

//go:embed host.js
var hostJS []byte

// Spec is one plugin to load: an npm package installed in the plugin
// folder (Path is its name) or a file (Path is absolute).
type Spec struct {
	Spec    string         `json:"spec"`
	Path    string         `json:"path"`
	Options map[string]any `json:"options,omitempty"`
}

// Options configure a Host.
type Options struct {
	// Bun is the Bun binary (default: the plugin folder's, else bun on PATH).
	Bun string
	// Dir is the plugin folder: npm packages are installed in its
	// node_modules, and the host program is written there.
	Dir     string
	Plugins []Spec
	// Config is the configuration handed to the plugins' config hook
	// (opencode's shape).
	Config any
	// Workspace loads a session directory's own .opencode/plugin and
	// .opencode/plugins files too (off: a folder the model writes to must
	// not add code to the server).
	Workspace bool
	// Timeout bounds each awaited hook (default 10 s); ToolTimeout each
	// call of a plugin's tool (default 10 min), which an abort also ends.
	Timeout     time.Duration
	ToolTimeout time.Duration
	// Env is the host's environment (the tools' scrubbed one).
	Env []string
	// Server says where the plugins' client reaches agentd, and with
	// which headers (its password); called when an instance is made.
	Server func() (url string, headers map[string]string)
	Logger *slog.Logger
	// Backoff is the first pause before a host that died is started again,
	// doubling to BackoffMax (defaults 500 ms and 30 s).
	Backoff, BackoffMax time.Duration
}

// Host is the plugin host process and its supervisor.
type Host struct {
	opts Options
	log  *slog.Logger

	mu       sync.Mutex
	cur      *proc         // nil while (re)starting
	up       chan struct{} // closed when cur is set again
	ready    chan struct{}
	stopping bool
	cancel   context.CancelFunc
	done     chan struct{}
	stopOnce sync.Once
	probing  atomic.Bool
	// wantEvents is set once an instance has an event hook: until then
	// events are not sent at all.
	wantEvents atomic.Bool
	// Restarts counts the host's restarts (for tests and the log).
	restarts atomic.Int64
	// historySent counts the history's messages sent to the host (for
	// tests and benchmarks: a step sends only what changed).
	historySent atomic.Int64
	tools       *toolSource
	calls       sync.Map // tool call ref → *callState
	auth        authHost // the auth and provider hooks (auth.go)
	fetchWindow int      // a fetch body's flow-control window (fetch.go)
	// events is the event hook's queue (live.go), drained until
	// eventsDone is closed.
	events     *eventQueue
	eventsDone chan struct{}
}

// proc is one host process.
type proc struct {
	cmd    *exec.Cmd
	conn   *conn
	exited chan struct{}
	mu     sync.Mutex
	known  map[string]*made // directory → its instance
	// sent are the fingerprints of the history last sent for each
	// session (see transformMessages).
	sent map[string][]uint64
	// eventsSeen is how many events the host said it has taken in.
	eventsSeen atomic.Int64
}

// New returns a host; Start starts it.
func New(opts Options) *Host {
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.ToolTimeout <= 0 {
		opts.ToolTimeout = 10 * time.Minute
	}
	if opts.Backoff <= 0 {
		opts.Backoff = 500 * time.Millisecond
	}
	if opts.BackoffMax <= 0 {
		opts.BackoffMax = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Server == nil {
		opts.Server = func() (string, map[string]string) { return "http://127.0.0.1:4096", nil }
	}
	h := &Host{opts: opts, log: opts.Logger.With("component", "plugin"), ready: make(chan struct{}), done: make(chan struct{}),
		up: make(chan struct{}), fetchWindow: fetchWindow}
	h.tools = &toolSource{h: h}
	h.events, h.eventsDone = newEventQueue(), make(chan struct{})
	return h
}

// BunPath is the Bun binary of a plugin folder, if it has one.
func BunPath(dir string) string {
	p := filepath.Join(dir, "node_modules", ".bin", "bun")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return ""
}

// Start writes the host program, starts the host and loads the plugins.
// It returns once they are loaded (or failed to); a plugin that fails to
// load is logged and left out. The host is then kept running until Stop.
func (h *Host) Start(ctx context.Context) error {
	if h.opts.Bun == "" {
		h.opts.Bun = BunPath(h.opts.Dir)
	}
	if h.opts.Bun == "" {
		p, err := exec.LookPath("bun")
		if err != nil {
			return errors.New("plugins are configured but Bun is missing: run agentd plugin install, or set agentd.plugins.bun")
		}
		h.opts.Bun = p
	}
	if err := os.MkdirAll(h.opts.Dir, 0o700); err != nil {
		return fmt.Errorf("plugin folder: %w", err)
	}
	if err := os.WriteFile(filepath.Join(h.opts.Dir, "agentd-host.mjs"), hostJS, 0o600); err != nil {
		return fmt.Errorf("write plugin host: %w", err)
	}
	p, err := h.spawn(ctx)
	if err != nil {
		return err
	}
	sup, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h.mu.Lock()
	h.cur, h.cancel = p, cancel
	close(h.ready)
	close(h.up)
	h.mu.Unlock()
	go h.supervise(sup, p)
	go func() {
		defer close(h.eventsDone)
		h.sendEvents(sup)
	}()
	return nil
}

// spawn starts one host process and initialises it.
func (h *Host) spawn(ctx context.Context) (*proc, error) {
	toHost, hostIn, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	hostOut, fromHost, err := os.Pipe()
	if err != nil {
		toHost.Close()
		hostIn.Close()
		return nil, err
	}
	cmd := exec.Command(h.opts.Bun, filepath.Join(h.opts.Dir, "agentd-host.mjs"))
	cmd.Dir = h.opts.Dir
	cmd.Env = h.opts.Env
	cmd.ExtraFiles = []*os.File{toHost, fromHost}
	cmd.Stdout = &logWriter{log: h.log, level: slog.LevelInfo}
	cmd.Stderr = &logWriter{log: h.log, level: slog.LevelWarn}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	toHost.Close()
	fromHost.Close()
	if err != nil {
		hostIn.Close()
		hostOut.Close()
		return nil, fmt.Errorf("start plugin host: %w", err)
	}
	p := &proc{cmd: cmd, exited: make(chan struct{}), known: map[string]*made{}, sent: map[string][]uint64{}}
	ready := make(chan struct{})
	var once sync.Once
	p.conn = newConn(hostIn, func(m message) (any, error) {
		switch m.Method {
		case "ready":
			once.Do(func() { close(ready) })
			return nil, nil
		case "events.seen":
			p.eventsSeenFrom(m.Params, h.events.seen)
			return nil, nil
		}
		return h.serve(m)
	})
	go func() {
		p.conn.read(hostOut, func(err error) { h.log.Warn("plugin host", "err", err) })
		h.fetchesGone(p)
		hostOut.Close()
		_ = cmd.Wait()
		hostIn.Close()
		close(p.exited)
	}()
	if err := h.initialise(ctx, p, ready); err != nil {
		h.kill(p)
		<-p.exited
		return nil, err
	}
	return p, nil
}

// initialise waits for the host's ready line and loads the plugins.
func (h *Host) initialise(ctx context.Context, p *proc, ready chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, max(h.opts.Timeout, 60*time.Second))
	defer cancel()
	select {
	case <-ready:
	case <-p.exited:
		return errors.New("plugin host exited at start (see the log for its output)")
	case <-ctx.Done():
		return errors.New("plugin host did not start in time")
	}
	var res struct {
		Loaded []struct{ Spec, Error string }
	}
	err := p.conn.call(ctx, "init", map[string]any{"plugins": h.specs(), "config": h.opts.Config}, &res)
	if err != nil {
		return fmt.Errorf("load plugins: %w", err)
	}
	for _, l := range res.Loaded {
		if l.Error != "" {
			h.log.Error("plugin not loaded", "plugin", l.Spec, "err", l.Error)
		} else {
			h.log.Debug("plugin loaded", "plugin", l.Spec)
		}
	}
	return nil
}

func (h *Host) specs() []Spec {
	if h.opts.Plugins == nil {
		return []Spec{}
	}
	return h.opts.Plugins
}

// supervise starts the host again when it dies, after a pause that
// doubles while it keeps dying soon after its start.
func (h *Host) supervise(ctx context.Context, p *proc) {
	defer close(h.done)
	pause := h.opts.Backoff
	for {
		started := time.Now()
		select {
		case <-p.exited:
		case <-ctx.Done():
			return
		}
		h.mu.Lock()
		h.cur, h.up = nil, make(chan struct{})
		stopping := h.stopping
		h.mu.Unlock()
		if stopping {
			return
		}
		if time.Since(started) > time.Minute {
			pause = h.opts.Backoff
		}
		h.log.Error("plugin host exited; starting it again", "code", p.cmd.ProcessState.ExitCode(), "after", pause)
		for {
			t := time.NewTimer(pause)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
			pause = min(pause*2, h.opts.BackoffMax)
			next, err := h.spawn(ctx)
			if err == nil {
				p = next
				break
			}
			h.log.Error("restart plugin host", "err", err, "next", pause)
		}
		h.restarts.Add(1)
		h.mu.Lock()
		if h.stopping {
			h.mu.Unlock()
			h.kill(p)
			return
		}
		h.cur = p
		close(h.up)
		h.mu.Unlock()
	}
}

// Pid is the host process's id (0 while it restarts), for measurements.
func (h *Host) Pid() int {
	if p := h.running(); p != nil && p.cmd.Process != nil {
		return p.cmd.Process.Pid
	}
	return 0
}

// Restarts says how often the host was started again after it died.
func (h *Host) Restarts() int64 { return h.restarts.Load() }

// Stop lets the plugins dispose of what they hold (bounded), ends the host
// and waits for it. It is idempotent, and safe before Start and on nil.
func (h *Host) Stop() {
	if h == nil {
		return
	}
	h.stopOnce.Do(func() {
		h.mu.Lock()
		h.stopping = true
		p, cancel := h.cur, h.cancel
		h.mu.Unlock()
		if cancel == nil {
			return
		}
		if p != nil {
			ctx, done := context.WithTimeout(context.Background(), 2*time.Second)
			_ = p.conn.call(ctx, "dispose", struct{}{}, nil)
			done()
			h.kill(p)
			<-p.exited
		}
		cancel()
		<-h.done
		<-h.eventsDone
	})
}

func (h *Host) kill(p *proc) {
	if p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// current is the running host process. While the host restarts after a
// crash it waits for it, as long as a hook may take.
func (h *Host) current(ctx context.Context) (*proc, error) {
	h.mu.Lock()
	p, up, stopping := h.cur, h.up, h.stopping
	h.mu.Unlock()
	switch {
	case p != nil:
		return p, nil
	case stopping:
		return nil, &HookError{Message: "plugin host stopped"}
	}
	t := time.NewTimer(h.opts.Timeout)
	defer t.Stop()
	select {
	case <-up:
		return h.current(ctx)
	case <-t.C:
		return nil, &HookError{Message: "plugin host is restarting after a crash and did not come back in " + h.opts.Timeout.String()}
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// running is the host process, nil while it restarts.
func (h *Host) running() *proc {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cur
}

// probe checks, after a call timed out, that the host still answers; a
// host that does not (a plugin spinning in a loop holds its only thread)
// is killed, and the supervisor starts it again.
func (h *Host) probe(p *proc) {
	if !h.probing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer h.probing.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := p.conn.call(ctx, "ping", struct{}{}, nil); err != nil && ctx.Err() != nil {
			h.log.Error("plugin host does not answer; killing it", "err", err)
			h.kill(p)
		}
	}()
}

// logWriter logs the host's output a line at a time.
type logWriter struct {
	log   *slog.Logger
	level slog.Level
	mu    sync.Mutex
	buf   []byte
}

func (w *logWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, b...)
	for {
		i := indexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.log.Log(context.Background(), w.level, "plugin output", "line", string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > 64<<10 {
		w.log.Log(context.Background(), w.level, "plugin output", "line", string(w.buf))
		w.buf = w.buf[:0]
	}
	return len(b), nil
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}
