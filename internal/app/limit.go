package app

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// capListener bounds the connections served at once. A connection beyond
// the cap has its first request read (within refuseWait) and answered 503
// with a Retry-After, then closed: a client never finds an answer on a
// connection before it asked (Go's client discards such an answer as
// unsolicited and reports an error instead of the 503), and a flood of
// connections cannot exhaust the server's file descriptors or memory.
type capListener struct {
	net.Listener
	max    int64
	active atomic.Int64
	// refusing bounds the connections being refused at once; past it a
	// connection is closed without an answer.
	refusing atomic.Int64
}

// refuseWait bounds how long a refused connection may take to send its
// request.
const refuseWait = 2 * time.Second

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.active.Add(1) > l.max {
			l.active.Add(-1)
			if l.refusing.Add(1) > l.max/8+16 {
				l.refusing.Add(-1)
				c.Close()
				continue
			}
			go func() {
				defer l.refusing.Add(-1)
				refuse(c)
			}()
			continue
		}
		return &countedConn{Conn: c, l: l}, nil
	}
}

// refuse reads a connection's first request and answers it 503.
func refuse(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(refuseWait))
	req, err := http.ReadRequest(bufio.NewReaderSize(c, 4096))
	if err != nil {
		return
	}
	// A small body is read so that the answer does not meet a reset.
	_, _ = io.Copy(io.Discard, io.LimitReader(req.Body, 64<<10))
	body := `{"name":"ServiceUnavailableError","data":{"message":"too many connections; try again"}}`
	_, _ = c.Write([]byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body))
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

// raiseFileLimit lifts the soft limit on open files to the hard one, as
// far as the kernel allows, and returns the soft limit in force.
func raiseFileLimit() uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	if lim.Cur < lim.Max {
		want := lim
		want.Cur = lim.Max
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want) == nil {
			lim = want
		}
	}
	return lim.Cur
}

// connLimit is how many connections fit in nofile open files, keeping a
// reserve (an eighth, between 32 and 1,024) for the database, the
// listener, providers, MCP servers and tools. requested, when set, is
// lowered to it; 0 means as many as fit, at most 65,536.
func connLimit(requested int, nofile uint64) int {
	if nofile == 0 {
		nofile = 1024
	}
	reserve := min(max(nofile/8, 32), 1024)
	fit := 16
	if nofile > reserve+16 {
		fit = int(min(nofile-reserve, 65536))
	}
	if requested > 0 {
		return min(requested, fit)
	}
	return fit
}
