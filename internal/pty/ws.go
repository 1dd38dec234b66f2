package pty

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Limits of a terminal's websocket.
const (
	// frameMax bounds the output sent in one frame (opencode's replay
	// chunk).
	frameMax = 64 << 10
	// inputMax bounds one frame of input.
	inputMax = 1 << 20
	// sendTimeout is how long a client may take to take a frame; past it
	// the connection is dropped (the output stays kept for a reconnect).
	sendTimeout = 30 * time.Second
	// closeGrace is how long a stopping server waits for its clients to
	// answer its close before it cuts their connections.
	closeGrace = time.Second
)

// Connect serves the terminal's websocket in opencode's protocol: the
// output kept from cursor (0: everything kept; -1: nothing, only what
// comes next; a cursor older than what is kept starts at the oldest
// kept), then a binary frame of a 0x00 byte and {"cursor":N}, N the
// position after that output, then the output as it comes, one text
// frame at a time; cursors count UTF-16 code units, as a browser counts
// the text it receives. What the client sends, text or binary, is typed
// into the terminal. The socket is closed with 1000 once the terminal has
// ended and its output has been sent, and with 1001 when the server
// stops.
//
// The caller has decided who may connect: it answers ErrNotFound or
// ErrStopped before upgrading, and nothing after.
func (m *Manager) Connect(w http.ResponseWriter, r *http.Request, id string, cursor int64) error {
	hj := &hijacked{ResponseWriter: w}
	t, ctx, err := m.attach(id, hj)
	if err != nil {
		return err
	}
	defer m.detach(hj)
	// The server judged the request's Origin and Host by the operator's
	// rules, as it does every request's; a second judge with other rules
	// would refuse origins the operator allowed (--cors).
	c, err := websocket.Accept(hj, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return nil // Accept has answered
	}
	c.SetReadLimit(inputMax)
	// The stream stops when the server stops or the client goes; reads
	// are never cancelled (a cancelled read closes the socket at once),
	// they end when the socket is closed.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	typed := make(chan struct{})
	go func() {
		defer close(typed)
		defer cancel()
		for {
			_, data, err := c.Read(context.Background())
			if err != nil {
				return
			}
			_ = t.write(data)
		}
	}()
	code, reason := m.stream(ctx, c, t, cursor)
	_ = c.Close(code, reason)
	<-typed
	return nil
}

// attach registers a websocket for terminal id, unless the manager is
// not serving.
func (m *Manager) attach(id string, hj *hijacked) (*term, context.Context, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state != stateRunning {
		return nil, nil, ErrStopped
	}
	t := m.terms[id]
	if t == nil {
		return nil, nil, ErrNotFound
	}
	m.conns.Add(1)
	m.sockets[hj] = struct{}{}
	return t, m.ctx, nil
}

func (m *Manager) detach(hj *hijacked) {
	m.mu.Lock()
	delete(m.sockets, hj)
	m.mu.Unlock()
	m.conns.Done()
}

// hijacked keeps the connection a websocket took over, so that Stop can
// cut it when the client does not answer the close in time.
type hijacked struct {
	http.ResponseWriter
	mu   sync.Mutex
	conn net.Conn
}

// Hijack implements http.Hijacker.
func (h *hijacked) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	h.mu.Lock()
	h.conn = conn
	h.mu.Unlock()
	return conn, brw, err
}

// Unwrap gives http.ResponseController the writer underneath.
func (h *hijacked) Unwrap() http.ResponseWriter { return h.ResponseWriter }

// cut closes the connection, if it was taken over.
func (h *hijacked) cut() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conn != nil {
		h.conn.Close()
	}
}

// stream sends the replay, the cursor frame and the live output, until
// the output ends, the client goes or the server stops; it returns how to
// close the socket.
func (m *Manager) stream(ctx context.Context, c *websocket.Conn, t *term, cursor int64) (websocket.StatusCode, string) {
	end := t.out.cursor()
	from := cursor
	if from < 0 || from > end {
		from = end
	}
	for from < end && ctx.Err() == nil {
		text, next, _, _ := t.out.read(from, end, frameMax)
		if text == "" {
			break
		}
		if send(ctx, c, websocket.MessageText, []byte(text)) != nil {
			return websocket.StatusGoingAway, "send failed"
		}
		from = next
	}
	meta := append([]byte{0}, `{"cursor":`+strconv.FormatInt(end, 10)+`}`...)
	if send(ctx, c, websocket.MessageBinary, meta) != nil {
		return websocket.StatusGoingAway, "send failed"
	}
	pos := end
	for {
		if ctx.Err() != nil {
			return websocket.StatusGoingAway, "server stopping"
		}
		text, next, wake, ended := t.out.read(pos, -1, frameMax)
		if text != "" {
			if send(ctx, c, websocket.MessageText, []byte(text)) != nil {
				return websocket.StatusGoingAway, "send failed"
			}
			pos = next
			continue
		}
		if ended {
			return websocket.StatusNormalClosure, "terminal exited"
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return websocket.StatusGoingAway, "server stopping"
		}
	}
}

// send writes one frame. A stopping server does not cancel it: a write
// whose context ends closes the socket without the close frame (a client
// saw EOF, not 1001, when the kill's last output raced the stop); the
// stream looks at ctx between frames instead, and Stop cuts a client that
// does not take the frame within closeGrace.
func send(ctx context.Context, c *websocket.Conn, typ websocket.MessageType, p []byte) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sendTimeout)
	defer cancel()
	return c.Write(ctx, typ, p)
}

// ParseCursor reads a connect request's cursor: absent or empty is 0
// (everything kept), -1 is only what comes next.
func ParseCursor(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < -1 {
		return 0, errors.New("cursor: want -1 or a position (a whole number from 0)")
	}
	return n, nil
}
