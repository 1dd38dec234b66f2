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
	pending map[int64]chan message
	closed  error
}

func newConn(w io.Writer, serve func(message) (any, error)) *conn {
	return &conn{w: w, serve: serve, pending: make(map[int64]chan message)}
}

func (c *conn) write(m any) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err = c.w.Write(b)
	return err
}

// call sends a request and waits for its answer, for ctx, or for the host
// to exit.
func (c *conn) call(ctx context.Context, method string, params, result any) error {
	p, err := json.Marshal(params)
	if err != nil {
		return err
	}
	ch := make(chan message, 1)
	c.mu.Lock()
	if c.closed != nil {
		c.mu.Unlock()
		return c.closed
	}
	c.next++
	id := c.next
	c.pending[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()
	if err := c.write(message{ID: json.RawMessage(strconv.FormatInt(id, 10)), Method: method, Params: p}); err != nil {
		return fmt.Errorf("%w: %v", errHostGone, err)
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return &HookError{Message: m.Error.Message}
		}
		if result == nil || len(m.Result) == 0 {
			return nil
		}
		return json.Unmarshal(m.Result, result)
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
	c.pending = map[int64]chan message{}
	c.mu.Unlock()
	for _, ch := range waiting {
		ch <- message{Error: &rpcError{Message: err.Error()}}
	}
}

func (c *conn) dispatch(m message) {
	if m.Method == "" {
		id, err := strconv.ParseInt(string(m.ID), 10, 64)
		if err != nil {
			return
		}
		c.mu.Lock()
		ch := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		if ch != nil {
			ch <- m
		}
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
