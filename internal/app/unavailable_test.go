package app_test

import (
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/store/postgres/pgtest"
)

// cutProxy forwards TCP to target until cut, which closes every
// connection and stops accepting: the database seems gone.
type cutProxy struct {
	ln     net.Listener
	mu     sync.Mutex
	conns  []net.Conn
	closed bool
	wg     sync.WaitGroup
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			if p.closed {
				c.Close()
				up.Close()
				p.mu.Unlock()
				return
			}
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			p.wg.Go(func() { io.Copy(up, c); up.Close() })
			p.wg.Go(func() { io.Copy(c, up); c.Close() })
		}
	})
	t.Cleanup(p.cut)
	return p
}

func (p *cutProxy) cut() {
	p.mu.Lock()
	p.closed = true
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}

// TestReadsUnavailableWhileDatabaseIs: while PostgreSQL cannot be reached,
// reads answer 503 with Retry-After, as writes do, not 500.
func TestReadsUnavailableWhileDatabaseIs(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(pgtest.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := newCutProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	n := startNode(t, func(c *app.Config) { c.DBPath = u.String() })
	sid := n.session()
	proxy.cut()
	for _, path := range []string{"/session", "/session/" + sid, "/session/" + sid + "/message", "/session/" + sid + "/status"} {
		client := &http.Client{Timeout: 30 * time.Second}
		resp, err := client.Get(n.app.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "unavailable") {
			t.Errorf("GET %s with the database gone: %d %s", path, resp.StatusCode, body)
		}
	}
}
