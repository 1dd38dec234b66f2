package app

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// capListener bounds the connections served at once. A connection beyond
// the cap is answered 503 with a Retry-After and closed, so a flood of
// connections cannot exhaust the server's file descriptors or memory.
type capListener struct {
	net.Listener
	max    int64
	active atomic.Int64
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.active.Add(1) > l.max {
			l.active.Add(-1)
			go refuse(c)
			continue
		}
		return &countedConn{Conn: c, l: l}, nil
	}
}

// refuse answers a connection over the cap and closes it.
func refuse(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	body := `{"name":"ServiceUnavailableError","data":{"message":"too many connections; try again"}}`
	_, _ = c.Write([]byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: " +
		itoa(len(body)) + "\r\n\r\n" + body))
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// countedConn gives its place back when closed (once).
type countedConn struct {
	net.Conn
	l    *capListener
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.l.active.Add(-1) })
	return c.Conn.Close()
}
