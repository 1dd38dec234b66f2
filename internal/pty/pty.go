// Package pty serves terminals: a real pseudo-terminal per request,
// running a shell that a person types into (opencode's /pty routes; the
// web and desktop apps' terminal panel). A terminal is a shell the model
// does not drive, but it is confined as the model's commands are: it
// starts through the sandbox (it writes only in its workspace and its
// temporary directory and cannot read the server's files), with the
// tools' allow-listed environment (tool.Env), in a container of its own
// (builtin.Contain: process group, cgroup, marker), so that removing it,
// stopping the server, or the server's death ends everything it started.
//
// What a terminal printed is kept, bounded (Config.Buffer, 2 MiB like
// opencode's), for the clients that connect later or reconnect: a
// websocket replays it from the client's cursor, then streams. Both of
// agentd's APIs (opencode's v1 /pty and the v2 /api/pty) call one
// Manager through Service; whether a client may use it at all (the
// operator's switch, authentication, origins) is the server's to decide
// before it calls.
package pty

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/sandbox"
	"github.com/agentd/agentd/internal/tool"
)

// Service is what an API needs of the terminals; *Manager implements it.
type Service interface {
	Create(in CreateInput) (Info, error)
	// List returns the terminals of the workspace dir (all when dir is
	// empty), oldest first.
	List(dir string) []Info
	Get(id string) (Info, error)
	Update(id string, in UpdateInput) (Info, error)
	Resize(id string, size Size) error
	// Write types data into the terminal.
	Write(id string, data []byte) error
	// Remove ends the terminal and everything it started, and forgets it.
	Remove(id string) error
	// Ticket issues a connect token for the terminal; ConsumeTicket spends
	// one, reporting whether it was valid for that terminal.
	Ticket(id string) (Ticket, error)
	ConsumeTicket(ticket, id string) bool
	// Connect upgrades the request to the terminal's websocket and serves
	// it until either side closes it (see Manager.Connect).
	Connect(w http.ResponseWriter, r *http.Request, id string, cursor int64) error
	// Shells lists the shells of this machine.
	Shells() []Shell
}

// Info describes a terminal (opencode's Pty).
type Info struct {
	ID      string   `json:"id"`
	Title   string   `json:"title"`
	Command string   `json:"command"`
	Args    []string `json:"args"`
	Cwd     string   `json:"cwd"`
	// Status is running or exited; an exited terminal is kept, with its
	// output, until it is removed.
	Status   string `json:"status"`
	Pid      int    `json:"pid"`
	ExitCode *int   `json:"exitCode,omitempty"`
}

// The statuses of a terminal.
const (
	StatusRunning = "running"
	StatusExited  = "exited"
)

// CreateInput is what a client asks for (opencode's pty.create body),
// and the workspace it asks from.
type CreateInput struct {
	// Command is the program (default: the configured shell, as a login
	// shell); Args its arguments.
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`
	Title   string            `json:"title,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// Dir is the workspace (the request's directory, resolved): the only
	// place the terminal may change files; Cwd, relative to it or
	// absolute, must lie inside it.
	Dir string `json:"-"`
}

// UpdateInput changes a terminal's title or size.
type UpdateInput struct {
	Title string `json:"title,omitempty"`
	Size  *Size  `json:"size,omitempty"`
}

// Size is a terminal's size in characters.
type Size struct {
	Rows int `json:"rows"`
	Cols int `json:"cols"`
}

// Errors the APIs map to answers.
var (
	ErrNotFound = errors.New("terminal not found")
	ErrStopped  = errors.New("the server is stopping")
)

// InputError is a request the client can correct.
type InputError struct{ Msg string }

func (e *InputError) Error() string { return e.Msg }

func inputErr(format string, args ...any) error {
	return &InputError{Msg: fmt.Sprintf(format, args...)}
}

// Config is how terminals are run.
type Config struct {
	// Shell is the default program (default: $SHELL, else bash, else sh).
	Shell string
	// Max bounds the terminals kept at once, running or exited (default
	// 16); past it the oldest exited one is forgotten, and with none a
	// new terminal is refused.
	Max int
	// Buffer is how many bytes of output each terminal keeps for replay
	// (default 2 MiB).
	Buffer int
	// Env is the environment terminals start from (nil: the server's less
	// its secrets, as tools).
	Env *tool.Env
	// Sandbox confines terminals (nil: unconfined).
	Sandbox *sandbox.Sandbox
	// Scope names the server's database for the containers' markers, as
	// tool calls' (engine.Config.ToolScope).
	Scope string
	// Notify receives opencode's pty.created, pty.updated, pty.exited and
	// pty.deleted events with their properties (nil: none are sent).
	Notify func(typ string, props any)
	Logger *slog.Logger
	// TicketTTL is how long a connect token is valid (default TicketTTL).
	TicketTTL time.Duration
}

// Defaults of Config.
const (
	DefaultMax    = 16
	DefaultBuffer = 2 << 20
	// maxTitle bounds a terminal's title, in bytes.
	maxTitle = 1 << 10
	// drainGrace is how long a terminal's output is read after its shell
	// and everything it started were killed: a process beyond reach that
	// holds the terminal open must not keep it running.
	drainGrace = time.Second
)

// Manager runs the terminals of a server.
type Manager struct {
	cfg     Config
	log     *slog.Logger
	tickets *tickets

	mu       sync.Mutex
	state    int // stateNew, stateRunning, stateStopped
	terms    map[string]*term
	starting int
	ctx      context.Context
	cancel   context.CancelFunc

	procs   sync.WaitGroup // creations, and each terminal's reader and waiter
	conns   sync.WaitGroup // websockets being served
	sockets map[*hijacked]struct{}
}

const (
	stateNew = iota
	stateRunning
	stateStopped
)

var _ Service = (*Manager)(nil)

// New returns a manager; it serves once started.
func New(cfg Config) *Manager {
	if cfg.Max <= 0 {
		cfg.Max = DefaultMax
	}
	if cfg.Buffer <= 0 {
		cfg.Buffer = DefaultBuffer
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.TicketTTL <= 0 {
		cfg.TicketTTL = TicketTTL
	}
	if cfg.Shell == "" {
		cfg.Shell = defaultShell()
	}
	return &Manager{cfg: cfg, log: cfg.Logger.With("component", "pty"), tickets: newTickets(cfg.TicketTTL, time.Now),
		terms: map[string]*term{}, sockets: map[*hijacked]struct{}{}}
}

// Start makes the manager serve. It fails where this system cannot open
// terminals.
func (m *Manager) Start(ctx context.Context) error {
	if err := supported(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state != stateNew {
		return errors.New("pty: started twice")
	}
	m.ctx, m.cancel = context.WithCancel(context.WithoutCancel(ctx))
	m.state = stateRunning
	return nil
}

// Stop closes every websocket (1001, going away), kills every terminal
// and what it started, and waits for all of it. It is idempotent, safe
// before Start, and on a nil Manager.
func (m *Manager) Stop() {
	if m == nil {
		return
	}
	m.mu.Lock()
	if m.state == stateStopped {
		m.mu.Unlock()
		return
	}
	running := m.state == stateRunning
	m.state = stateStopped
	terms := make([]*term, 0, len(m.terms))
	for _, t := range m.terms {
		terms = append(terms, t)
	}
	m.mu.Unlock()
	if !running {
		return
	}
	m.cancel()
	for _, t := range terms {
		t.kill()
	}
	m.waitSockets()
	m.procs.Wait()
}

// waitSockets waits for the websockets to close, cutting those whose
// client has not answered the close within closeGrace.
func (m *Manager) waitSockets() {
	closed := make(chan struct{})
	go func() {
		m.conns.Wait()
		close(closed)
	}()
	timer := time.NewTimer(closeGrace)
	defer timer.Stop()
	select {
	case <-closed:
		return
	case <-timer.C:
	}
	m.mu.Lock()
	for hj := range m.sockets {
		hj.cut()
	}
	m.mu.Unlock()
	<-closed
}

// Create starts a terminal.
func (m *Manager) Create(in CreateInput) (Info, error) {
	spec, err := m.prepare(in)
	if err != nil {
		return Info{}, err
	}
	evicted, err := m.reserve()
	if err != nil {
		return Info{}, err
	}
	defer m.procs.Done()
	if evicted != "" {
		m.notify("pty.deleted", map[string]any{"id": evicted})
	}
	t, err := m.spawn(spec)
	m.mu.Lock()
	m.starting--
	if err == nil && m.state != stateRunning {
		err = ErrStopped
		defer t.kill()
	}
	if err != nil {
		m.mu.Unlock()
		return Info{}, err
	}
	m.terms[t.info.ID] = t
	info := t.snapshot()
	m.mu.Unlock()
	m.log.Info("terminal started", "id", info.ID, "command", info.Command, "cwd", info.Cwd, "pid", info.Pid)
	m.notify("pty.created", map[string]any{"info": info})
	return info, nil
}

// reserve takes a place for a new terminal, forgetting the oldest exited
// one (whose id it returns) when all are taken, and holds the manager's
// Stop until the caller releases procs.
func (m *Manager) reserve() (evicted string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state != stateRunning {
		return "", ErrStopped
	}
	if len(m.terms)+m.starting >= m.cfg.Max {
		var oldest *term
		for _, t := range m.terms {
			if t.exitedNow() && (oldest == nil || t.info.ID < oldest.info.ID) {
				oldest = t
			}
		}
		if oldest == nil {
			return "", inputErr("at most %d terminals at once: remove one first", m.cfg.Max)
		}
		evicted = oldest.info.ID
		delete(m.terms, evicted)
		m.tickets.forget(evicted)
	}
	m.starting++
	m.procs.Add(1)
	return evicted, nil
}

func (m *Manager) notify(typ string, props any) {
	if m.cfg.Notify != nil {
		m.cfg.Notify(typ, props)
	}
}

// lookup returns the terminal id.
func (m *Manager) lookup(id string) (*term, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t := m.terms[id]; t != nil {
		return t, nil
	}
	return nil, ErrNotFound
}

// List implements Service.
func (m *Manager) List(dir string) []Info {
	m.mu.Lock()
	out := make([]Info, 0, len(m.terms))
	for _, t := range m.terms {
		if dir == "" || t.dir == dir {
			out = append(out, t.snapshot())
		}
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Get implements Service.
func (m *Manager) Get(id string) (Info, error) {
	t, err := m.lookup(id)
	if err != nil {
		return Info{}, err
	}
	return t.snapshot(), nil
}

// Update implements Service: a title, a size, or both.
func (m *Manager) Update(id string, in UpdateInput) (Info, error) {
	if len(in.Title) > maxTitle {
		return Info{}, inputErr("title: at most %d bytes", maxTitle)
	}
	if in.Size != nil {
		if err := validSize(*in.Size); err != nil {
			return Info{}, err
		}
	}
	t, err := m.lookup(id)
	if err != nil {
		return Info{}, err
	}
	if in.Size != nil {
		if err := t.resize(*in.Size); err != nil {
			return Info{}, err
		}
	}
	if in.Title != "" {
		t.mu.Lock()
		t.info.Title = in.Title
		t.mu.Unlock()
	}
	info := t.snapshot()
	m.notify("pty.updated", map[string]any{"info": info})
	return info, nil
}

func validSize(s Size) error {
	if s.Rows <= 0 || s.Cols <= 0 || s.Rows > 0xFFFF || s.Cols > 0xFFFF {
		return inputErr("size: rows and cols must be between 1 and 65535, got %dx%d", s.Rows, s.Cols)
	}
	return nil
}

// Resize implements Service.
func (m *Manager) Resize(id string, size Size) error {
	if err := validSize(size); err != nil {
		return err
	}
	t, err := m.lookup(id)
	if err != nil {
		return err
	}
	return t.resize(size)
}

// Write implements Service. Writing to an exited terminal does nothing.
func (m *Manager) Write(id string, data []byte) error {
	t, err := m.lookup(id)
	if err != nil {
		return err
	}
	return t.write(data)
}

// Remove implements Service: the terminal's shell and everything it
// started are killed before it returns.
func (m *Manager) Remove(id string) error {
	m.mu.Lock()
	t := m.terms[id]
	if t != nil {
		delete(m.terms, id)
	}
	m.mu.Unlock()
	if t == nil {
		return ErrNotFound
	}
	t.kill()
	<-t.exited
	m.tickets.forget(id)
	m.log.Info("terminal removed", "id", id)
	m.notify("pty.deleted", map[string]any{"id": id})
	return nil
}

// Ticket implements Service.
func (m *Manager) Ticket(id string) (Ticket, error) {
	if _, err := m.lookup(id); err != nil {
		return Ticket{}, err
	}
	return m.tickets.issue(id), nil
}

// ConsumeTicket implements Service.
func (m *Manager) ConsumeTicket(ticket, id string) bool { return m.tickets.consume(ticket, id) }

// spec is a terminal to start, its input checked.
type spec struct {
	id, dir, cwd, path, title string
	args, env                 []string
}

// prepare checks the request and resolves what it names: the program on
// the server's PATH, the working directory inside the workspace, the
// environment.
func (m *Manager) prepare(in CreateInput) (spec, error) {
	s := spec{id: core.NewID("pty", false), dir: in.Dir, title: in.Title, args: append([]string{}, in.Args...)}
	if s.dir == "" || !filepath.IsAbs(s.dir) {
		return s, inputErr("a terminal needs a workspace directory")
	}
	if len(s.title) > maxTitle {
		return s, inputErr("title: at most %d bytes", maxTitle)
	}
	if s.title == "" {
		s.title = "Terminal " + s.id[max(0, len(s.id)-4):]
	}
	command := in.Command
	if command == "" {
		command = m.cfg.Shell
	}
	if len(in.Args) == 0 && loginShell(command) {
		s.args = []string{"-l"}
	}
	path, err := exec.LookPath(command)
	if err != nil {
		return s, inputErr("command %q: %v", command, err)
	}
	s.path = path
	if s.cwd, err = workdir(s.dir, in.Cwd); err != nil {
		return s, err
	}
	if s.env, err = environment(in.Env); err != nil {
		return s, err
	}
	return s, nil
}

// loginShell reports whether command is a shell that takes -l.
func loginShell(command string) bool {
	switch filepath.Base(command) {
	case "bash", "zsh", "sh", "dash", "ksh", "mksh", "fish":
		return true
	}
	return false
}

// workdir resolves cwd (relative to dir, or absolute) and checks that it
// is a directory inside dir.
func workdir(dir, cwd string) (string, error) {
	if cwd == "" {
		return dir, nil
	}
	if !filepath.IsAbs(cwd) {
		cwd = filepath.Join(dir, cwd)
	}
	real, err := filepath.EvalSymlinks(cwd)
	if err != nil {
		return "", inputErr("cwd %s: %v", cwd, err)
	}
	if real != dir && !strings.HasPrefix(real, strings.TrimSuffix(dir, "/")+"/") {
		return "", inputErr("cwd %s is outside the workspace %s", cwd, dir)
	}
	if st, err := os.Stat(real); err != nil || !st.IsDir() {
		return "", inputErr("cwd %s is not a directory", cwd)
	}
	return real, nil
}

// environment checks the client's variables and returns them as
// NAME=value, sorted.
func environment(vars map[string]string) ([]string, error) {
	out := make([]string, 0, len(vars))
	for k, v := range vars {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return nil, inputErr("env: %q is not a valid variable", k)
		}
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out, nil
}

// defaultShell is the server's $SHELL, else bash, else sh.
func defaultShell() string {
	for _, s := range []string{os.Getenv("SHELL"), "/bin/bash", "/usr/bin/bash", "/bin/sh"} {
		if s == "" {
			continue
		}
		if st, err := os.Stat(s); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return s
		}
	}
	return "/bin/sh"
}

// exitCode is the shell's exit status, or 128 plus the signal that ended
// it, as a shell reports one.
func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return 0
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return max(ps.ExitCode(), 0)
}
