package plugin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
)

// message is one line of the protocol: a request (id and method), a
// notification (method, no id) or an answer (id, result or error). Both
// sides send requests: agentd's ids are numbers, the host's strings.
type message struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *rpcError       `json:"error,omitempty"`
}

type rpcError struct {
	Message string `json:"message"`
	Stack   string `json:"stack,omitempty"`
}

// errHostGone fails the calls a host that exited leaves unanswered.
var errHostGone = errors.New("plugin host exited")

// conn is one host process's end of the protocol: it numbers requests,
// matches answers to them, and hands the host's own requests and
// notifications to serve.
type conn struct {
	w     io.Writer
	wmu   sync.Mutex
	serve func(m message) (any, error)

	mu      sync.Mutex
	next    int64
	pending map[int64]*waiter
	closed  error
}

// waiter is a call waiting for its answer; the reader decodes the answer's
// result straight into result (one pass over what may be a large output).
type waiter struct {
	result any
	done   chan error
}

func newConn(w io.Writer, serve func(message) (any, error)) *conn {
	return &conn{w: w, serve: serve, pending: make(map[int64]*waiter)}
}

func (c *conn) write(m any) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return c.writeRaw(append(b, '\n'))
}

// writeRaw writes whole protocol lines, one writer at a time.
func (c *conn) writeRaw(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.w.Write(b)
	return err
}

// call sends a request and waits for its answer, for ctx, or for the host
// to exit. result, when not nil, receives the answer's result.
func (c *conn) call(ctx context.Context, method string, params, result any) error {
	p, err := json.Marshal(params)
	if err != nil {
		return err
	}
	w := &waiter{result: result, done: make(chan error, 1)}
	c.mu.Lock()
	if c.closed != nil {
		c.mu.Unlock()
		return c.closed
	}
	c.next++
	id := c.next
	c.pending[id] = w
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()
	// Written by hand: json.Marshal would scan params (a tool's output, a
	// prompt's parts) once more to check what it has just made.
	line := make([]byte, 0, len(p)+len(method)+40)
	line = append(line, `{"id":`...)
	line = strconv.AppendInt(line, id, 10)
	line = append(line, `,"method":`...)
	line = strconv.AppendQuote(line, method)
	line = append(line, `,"params":`...)
	line = append(line, p...)
	line = append(line, "}\n"...)
	if err := c.writeRaw(line); err != nil {
		return fmt.Errorf("%w: %v", errHostGone, err)
	}
	select {
	case err := <-w.done:
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// notify sends a notification; nobody answers it.
func (c *conn) notify(method string, params any) error {
	p, err := json.Marshal(params)
	if err != nil {
		return err
	}
	return c.write(message{Method: method, Params: p})
}

// read reads the host's lines until it closes its end, then fails every
// call still waiting with err.
func (c *conn) read(r io.Reader, onError func(error)) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		if c.answer(sc.Bytes()) {
			continue
		}
		var m message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			onError(fmt.Errorf("bad line from plugin host: %w", err))
			continue
		}
		c.dispatch(m)
	}
	err := sc.Err()
	if err == nil {
		err = errHostGone
	} else {
		err = fmt.Errorf("%w: %v", errHostGone, err)
	}
	c.mu.Lock()
	c.closed = err
	waiting := c.pending
	c.pending = map[int64]*waiter{}
	c.mu.Unlock()
	for _, w := range waiting {
		w.done <- &HookError{Message: err.Error()}
	}
}

// answer decodes a line that answers one of agentd's calls (the host
// writes the id first) into its waiter; false for any other line.
func (c *conn) answer(line []byte) bool {
	rest, ok := bytes.CutPrefix(line, []byte(`{"id":`))
	if !ok {
		return false
	}
	end := bytes.IndexByte(rest, ',')
	id, err := strconv.ParseInt(string(rest[:max(end, 0)]), 10, 64)
	if end < 0 || err != nil {
		return false
	}
	c.mu.Lock()
	w := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if w == nil {
		return true // its caller gave up
	}
	var m struct {
		Method string    `json:"method"`
		Result any       `json:"result"`
		Error  *rpcError `json:"error"`
	}
	m.Result = w.result
	if m.Result == nil {
		m.Result = &json.RawMessage{}
	}
	switch err := json.Unmarshal(line, &m); {
	case m.Error != nil:
		w.done <- &HookError{Message: m.Error.Message}
	case err != nil:
		w.done <- &HookError{Message: "the host's answer: " + err.Error()}
	default:
		w.done <- nil
	}
	return true
}

func (c *conn) dispatch(m message) {
	if m.Method == "" {
		return
	}
	if len(m.ID) == 0 || bytes.Equal(m.ID, []byte("null")) {
		_, _ = c.serve(m)
		return
	}
	// The host's requests (a tool's ask) may wait for a person: they are
	// answered from a goroutine of their own.
	go func() {
		res, err := c.serve(m)
		out := message{ID: m.ID}
		if err != nil {
			out.Error = &rpcError{Message: err.Error()}
		} else if out.Result, err = json.Marshal(res); err != nil {
			out.Error = &rpcError{Message: err.Error()}
		}
		_ = c.write(out)
	}()
}

// maxLine bounds one line of the protocol (a tool's output, a hook's
// changed parts).
const maxLine = 64 << 20

// HookError is what a plugin threw, or why its answer never came (a
// timeout, the host's exit).
type HookError struct {
	Message string
}

func (e *HookError) Error() string { return e.Message }
