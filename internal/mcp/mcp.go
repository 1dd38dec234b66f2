// Package mcp connects agentd to MCP servers (opencode's "mcp"
// configuration key), local ones over stdio and remote ones over
// streamable HTTP, through the official Go SDK, and offers their tools to
// the model as "<server>_<tool>".
package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd/agentd/internal/tool"
)

// Server configures one MCP server, in opencode's shape.
type Server struct {
	// Type is "local" (a command speaking MCP on stdio) or "remote" (a
	// streamable HTTP endpoint).
	Type        string            `json:"type"`
	Command     []string          `json:"command,omitempty"`
	Cwd         string            `json:"cwd,omitempty"`
	Environment map[string]string `json:"environment,omitempty"`
	URL         string            `json:"url,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
	Enabled     *bool             `json:"enabled,omitempty"`
	// Timeout bounds connecting and listing tools, in milliseconds
	// (default 30,000).
	Timeout int `json:"timeout,omitempty"`
}

// Check reports what is wrong with a server's configuration.
func (s Server) Check() error {
	switch s.Type {
	case "local":
		if len(s.Command) == 0 || s.Command[0] == "" {
			return errors.New("a local server needs a command")
		}
	case "remote":
		if !strings.HasPrefix(s.URL, "http://") && !strings.HasPrefix(s.URL, "https://") {
			return fmt.Errorf("url %q: want an http:// or https:// address", s.URL)
		}
	default:
		return fmt.Errorf("type %q: want local or remote", s.Type)
	}
	if s.Timeout < 0 {
		return fmt.Errorf("timeout %d: want a positive number of milliseconds", s.Timeout)
	}
	return nil
}

func (s Server) enabled() bool { return s.Enabled == nil || *s.Enabled }

// Status is a server's state in opencode's shape: connected, disabled or
// failed (with the error).
type Status struct {
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
}

// Statuses.
const (
	StatusConnected = "connected"
	StatusDisabled  = "disabled"
	StatusFailed    = "failed"
)

// Options configures a Manager.
type Options struct {
	Servers map[string]Server
	// Version is agentd's, told to the servers.
	Version string
	Logger  *slog.Logger
	// Backoff is the first pause before reconnecting a server that failed
	// or exited (default 1 s), doubled up to 30 s.
	Backoff time.Duration
	// CallTimeout bounds one tool call (default 5 minutes); an abort ends
	// it sooner.
	CallTimeout time.Duration
	// Lazy connects the servers when their tools are first asked for (the
	// first run), instead of at Start.
	Lazy bool
}

// Manager keeps the configured servers connected: it connects at Start,
// reconnects a server that fails or exits (with a growing pause), and
// disconnects at Stop. A server that cannot be reached is reported in
// Statuses and logged, never fatal.
type Manager struct {
	o      Options
	log    *slog.Logger
	client *sdk.Client

	mu    sync.Mutex
	conns map[string]*conn

	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	connect1 sync.Once
	stopOnce sync.Once
}

// conn is one server's connection and what it offers.
type conn struct {
	name    string
	cfg     Server
	status  Status
	session *sdk.ClientSession
	tools   []tool.Tool
	// stop ends the goroutine that keeps the server connected (nil when
	// none runs); off is set by Disconnect, until Connect.
	stop context.CancelFunc
	off  bool
}

// live reports whether the server is to be kept connected.
func (c *conn) live() bool { return c.cfg.enabled() && !c.off }

// New returns a manager of the servers; Start connects them.
func New(o Options) *Manager {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 5 * time.Minute
	}
	m := &Manager{o: o, log: o.Logger.With("component", "mcp"), conns: map[string]*conn{},
		client: sdk.NewClient(&sdk.Implementation{Name: "agentd", Version: o.Version}, nil)}
	for name, cfg := range o.Servers {
		c := &conn{name: name, cfg: cfg, status: Status{Status: StatusFailed, Error: "not connected yet"}}
		if !cfg.enabled() {
			c.status = Status{Status: StatusDisabled}
		}
		m.conns[name] = c
	}
	return m
}

// Start connects every enabled server in the background and keeps them
// connected until Stop; it does not wait. The first ask for tools waits
// until each server has connected or failed once (bounded by its
// timeout), so that the first runs see the servers' tools. A lazy manager
// connects when its tools are first asked for instead.
func (m *Manager) Start(ctx context.Context) {
	m.mu.Lock()
	m.ctx, m.cancel = context.WithCancel(context.WithoutCancel(ctx))
	m.mu.Unlock()
	if m.o.Lazy {
		m.mu.Lock()
		for _, c := range m.conns {
			if c.cfg.enabled() {
				c.status = Status{Status: StatusFailed, Error: "not connected yet: connected when a run first needs tools"}
			}
		}
		m.mu.Unlock()
		return
	}
	// Connecting goes on in the background: a server that hangs must not
	// delay the node's listener. A run that needs tools waits for every
	// server's first attempt (Tools).
	m.wg.Go(m.connectAll)
}

// connectAll starts keeping every enabled server connected (once) and
// waits for each one's first attempt.
func (m *Manager) connectAll() {
	m.connect1.Do(func() {
		m.mu.Lock()
		ctx := m.ctx
		m.mu.Unlock()
		if ctx == nil || ctx.Err() != nil {
			return
		}
		var first sync.WaitGroup
		m.mu.Lock()
		for _, c := range m.conns {
			if !c.live() || c.stop != nil {
				continue
			}
			first.Add(1)
			m.startKeep(ctx, c, first.Done)
		}
		m.mu.Unlock()
		first.Wait()
	})
}

// Stop disconnects every server (a local server's process is ended) and
// waits for the manager's goroutines. It is idempotent.
func (m *Manager) Stop() {
	m.stopOnce.Do(func() {
		m.mu.Lock()
		cancel := m.cancel
		m.mu.Unlock()
		if cancel == nil {
			return
		}
		cancel()
		// A lazy manager that never connected must not start now.
		m.connect1.Do(func() {})
		m.mu.Lock()
		for _, c := range m.conns {
			if c.session != nil {
				_ = c.session.Close()
			}
			c.session, c.tools = nil, nil
			if c.status.Status == StatusConnected {
				c.status = Status{Status: StatusFailed, Error: "agentd is stopping"}
			}
		}
		m.mu.Unlock()
		m.wg.Wait()
	})
}

// startKeep starts keeping c connected, under a context of its own that
// Disconnect cancels; connected is called after the first attempt. m.mu
// is held.
func (m *Manager) startKeep(ctx context.Context, c *conn, connected func()) {
	ctx, c.stop = context.WithCancel(ctx)
	m.wg.Go(func() { m.keep(ctx, c, connected) })
}

// keep connects a server and reconnects it whenever its session ends,
// pausing longer after each failure in a row. Its context ends with Stop
// or Disconnect, which change the server's state themselves: keep checks
// it under m.mu before each change it makes.
func (m *Manager) keep(ctx context.Context, c *conn, connected func()) {
	once := sync.OnceFunc(connected)
	defer once()
	pause := m.o.Backoff
	for ctx.Err() == nil {
		session, tools, err := m.connect(ctx, c)
		m.mu.Lock()
		if ctx.Err() != nil {
			// Stop or Disconnect came while connecting: they have closed
			// the sessions they saw, not this one.
			m.mu.Unlock()
			if err == nil {
				_ = session.Close()
			}
			return
		}
		if err != nil {
			c.status, c.session, c.tools = Status{Status: StatusFailed, Error: err.Error()}, nil, nil
		} else {
			c.status, c.session, c.tools = Status{Status: StatusConnected}, session, tools
		}
		m.mu.Unlock()
		once()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			m.log.Warn("MCP server unavailable; retrying", "server", c.name, "err", err, "retry", pause)
		} else {
			m.log.Info("MCP server connected", "server", c.name, "tools", len(tools))
			pause = m.o.Backoff
			werr := session.Wait()
			m.mu.Lock()
			if ctx.Err() != nil {
				m.mu.Unlock()
				return
			}
			c.status, c.session, c.tools = Status{Status: StatusFailed, Error: "the server closed the connection"}, nil, nil
			m.mu.Unlock()
			m.log.Warn("MCP server disconnected; reconnecting", "server", c.name, "err", werr, "retry", pause)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		pause = min(pause*2, 30*time.Second)
	}
}

// connect opens a session with the server and lists its tools.
func (m *Manager) connect(ctx context.Context, c *conn) (*sdk.ClientSession, []tool.Tool, error) {
	timeout := 30 * time.Second
	if c.cfg.Timeout > 0 {
		timeout = time.Duration(c.cfg.Timeout) * time.Millisecond
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var transport sdk.Transport
	switch c.cfg.Type {
	case "local":
		// The process lives as long as the session, not as long as the
		// connection attempt: exec.Command, not CommandContext.
		cmd := exec.Command(c.cfg.Command[0], c.cfg.Command[1:]...)
		cmd.Dir = c.cfg.Cwd
		cmd.Env = os.Environ()
		for k, v := range c.cfg.Environment {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		transport = &sdk.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	case "remote":
		transport = &sdk.StreamableClientTransport{Endpoint: c.cfg.URL,
			HTTPClient: &http.Client{Transport: headers{base: http.DefaultTransport, h: c.cfg.Headers}}}
	default:
		return nil, nil, fmt.Errorf("type %q: want local or remote", c.cfg.Type)
	}
	session, err := m.client.Connect(cctx, transport, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	var tools []tool.Tool
	for t, err := range session.Tools(cctx, nil) {
		if err != nil {
			_ = session.Close()
			return nil, nil, fmt.Errorf("list tools: %w", err)
		}
		schema, err := json.Marshal(t.InputSchema)
		if err != nil || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		tools = append(tools, &mcpTool{m: m, server: c.name, name: t.Name, desc: t.Description, schema: schema})
	}
	sort.Slice(tools, func(i, j int) bool { return tools[i].Name() < tools[j].Name() })
	return session, tools, nil
}

// headers adds the configured headers to every request to a remote server.
type headers struct {
	base http.RoundTripper
	h    map[string]string
}

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(h.h) > 0 {
		r = r.Clone(r.Context())
		for k, v := range h.h {
			r.Header.Set(k, v)
		}
	}
	return h.base.RoundTrip(r)
}

// Statuses reports every configured server's state, by name.
func (m *Manager) Statuses() map[string]Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]Status, len(m.conns))
	for name, c := range m.conns {
		out[name] = c.status
	}
	return out
}

// Tools implements tool.Source: the tools of the servers connected now,
// once every server has been tried (a lazy manager tries them first).
func (m *Manager) Tools() []tool.Tool {
	m.connectAll()
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []tool.Tool
	for _, c := range m.conns {
		out = append(out, c.tools...)
	}
	return out
}

// session returns the server's current session, if connected.
func (m *Manager) session(server string) *sdk.ClientSession {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c := m.conns[server]; c != nil {
		return c.session
	}
	return nil
}

// mcpTool is one tool of an MCP server, offered as "<server>_<tool>".
type mcpTool struct {
	m            *Manager
	server, name string
	desc         string
	schema       json.RawMessage
}

func (t *mcpTool) Name() string            { return sanitize(t.server) + "_" + sanitize(t.name) }
func (t *mcpTool) Description() string     { return t.desc }
func (t *mcpTool) Schema() json.RawMessage { return t.schema }

// Needs implements tool.Permissioned: an MCP tool's permission key is its
// name, as in opencode, so rules can allow, ask or deny a server's tools
// ("myserver_*") or one of them.
func (t *mcpTool) Needs(call tool.Call) []tool.Need {
	return []tool.Need{{Permission: t.Name(), Patterns: []string{"*"}, Always: []string{"*"}, Title: "Call " + t.Name()}}
}

// Run calls the tool. The call's context cancels the request (the SDK tells
// the server); a failed call is a result the model sees, except when no
// session could carry it.
func (t *mcpTool) Run(ctx context.Context, call tool.Call) (tool.Result, error) {
	s := t.m.session(t.server)
	if s == nil {
		return tool.Errorf(fmt.Sprintf("MCP server %s is not connected", t.server)), nil
	}
	var args map[string]any
	if len(call.Input) > 0 {
		if err := json.Unmarshal(call.Input, &args); err != nil {
			return tool.Errorf("invalid input: " + err.Error()), nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, t.m.o.CallTimeout)
	defer cancel()
	res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: t.name, Arguments: args})
	if err != nil {
		if ctx.Err() != nil && context.Cause(ctx) == context.DeadlineExceeded {
			return tool.Errorf(fmt.Sprintf("%s: no answer within %s", t.Name(), t.m.o.CallTimeout)), nil
		}
		return tool.Errorf(fmt.Sprintf("%s: %v", t.Name(), err)), nil
	}
	var b strings.Builder
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			b.WriteString(c.Text)
		case *sdk.ImageContent:
			fmt.Fprintf(&b, "[image %s, %d bytes]", c.MIMEType, len(c.Data))
		case *sdk.AudioContent:
			fmt.Fprintf(&b, "[audio %s, %d bytes]", c.MIMEType, len(c.Data))
		case *sdk.ResourceLink:
			fmt.Fprintf(&b, "[resource %s]", c.URI)
		case *sdk.EmbeddedResource:
			if c.Resource != nil {
				b.WriteString(c.Resource.Text)
			}
		}
		b.WriteByte('\n')
	}
	out := strings.TrimRight(b.String(), "\n")
	if out == "" && res.StructuredContent != nil {
		j, _ := json.Marshal(res.StructuredContent)
		out = string(j)
	}
	return tool.Result{Output: out, IsError: res.IsError, Title: t.Name(),
		Metadata: map[string]any{"mcpServer": t.server, "mcpTool": t.name}}, nil
}

// sanitize keeps a name to the characters providers accept in tool names.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			return r
		}
		return '_'
	}, s)
}
