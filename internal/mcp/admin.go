package mcp

import (
	"context"
	"errors"
	"fmt"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Errors of the run-time management of servers.
var (
	// ErrUnknown means no server has the name.
	ErrUnknown = errors.New("no MCP server has this name")
	// ErrExists means a server already has the name.
	ErrExists = errors.New("an MCP server already has this name")
	// ErrNotStarted means the manager is not running (before Start, after
	// Stop).
	ErrNotStarted = errors.New("the MCP manager is not running")
)

// Add adds a server at run time, under a name no server has, and
// connects it (unless its configuration disables it), waiting for the
// first attempt as Connect does. It lives until the manager stops: it is
// not written to any configuration.
func (m *Manager) Add(ctx context.Context, name string, s Server) (Status, error) {
	if name == "" {
		return Status{}, errors.New("a server needs a name")
	}
	if err := s.Check(); err != nil {
		return Status{}, err
	}
	m.mu.Lock()
	if _, ok := m.conns[name]; ok {
		m.mu.Unlock()
		return Status{}, fmt.Errorf("%s: %w", name, ErrExists)
	}
	if m.ctx == nil || m.ctx.Err() != nil {
		m.mu.Unlock()
		return Status{}, ErrNotStarted
	}
	c := &conn{name: name, cfg: s, status: Status{Status: StatusDisabled}}
	m.conns[name] = c
	m.mu.Unlock()
	m.log.Info("MCP server added at run time", "server", name, "type", s.Type)
	if !s.enabled() {
		return c.status, nil
	}
	return m.Connect(ctx, name)
}

// Connect connects a server now (one its configuration disables, or one
// Disconnect took down, included), restarting its connection if it has
// one, and keeps it connected from then on. It waits for the first
// attempt, up to the server's timeout or ctx, and returns the server's
// state then.
func (m *Manager) Connect(ctx context.Context, name string) (Status, error) {
	m.mu.Lock()
	c, ok := m.conns[name]
	if !ok {
		m.mu.Unlock()
		return Status{}, fmt.Errorf("%s: %w", name, ErrUnknown)
	}
	if m.ctx == nil || m.ctx.Err() != nil {
		m.mu.Unlock()
		return Status{}, ErrNotStarted
	}
	old := m.takeDown(c)
	on := true
	c.cfg.Enabled, c.off = &on, false
	c.status = Status{Status: StatusFailed, Error: "connecting"}
	first := make(chan struct{})
	m.startKeep(m.ctx, c, func() { close(first) })
	m.mu.Unlock()
	closeSession(old)
	// The first attempt is bounded by the server's timeout; the caller's
	// context bounds the wait, not the attempt.
	wait := time.Duration(c.cfg.Timeout)*time.Millisecond + time.Second
	if c.cfg.Timeout <= 0 {
		wait = 31 * time.Second
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-first:
	case <-t.C:
	case <-ctx.Done():
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return c.status, nil
}

// Disconnect closes a server's connection (a local server's process is
// ended) and keeps it down, its tools withdrawn, until Connect.
func (m *Manager) Disconnect(name string) error {
	m.mu.Lock()
	c, ok := m.conns[name]
	if !ok {
		m.mu.Unlock()
		return fmt.Errorf("%s: %w", name, ErrUnknown)
	}
	old := m.takeDown(c)
	c.off = true
	c.status = Status{Status: StatusDisabled}
	m.mu.Unlock()
	closeSession(old)
	m.log.Info("MCP server disconnected on request", "server", name)
	return nil
}

// Has reports whether a server has the name.
func (m *Manager) Has(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.conns[name]
	return ok
}

// takeDown ends the goroutine keeping c connected and withdraws its
// session, which the caller closes once m.mu is released. The goroutine
// checks its context under m.mu, which is held, so it changes nothing of
// c from here on.
func (m *Manager) takeDown(c *conn) *sdk.ClientSession {
	if c.stop != nil {
		c.stop()
		c.stop = nil
	}
	old := c.session
	c.session, c.tools = nil, nil
	return old
}

// closeSession closes a session taken down; for a local server it waits
// for the process, bounded by the transport's TerminateDuration.
func closeSession(s *sdk.ClientSession) {
	if s != nil {
		_ = s.Close()
	}
}
