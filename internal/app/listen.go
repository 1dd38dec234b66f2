package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"
)

// listen opens the node's port; it comes first in start-up so that a port
// in use is said before a database is created or migrated. A port in use
// is said in one line with what holds it when that is an agentd, and what
// to do.
func listen(cfg Config) (net.Listener, error) {
	addr := net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port))
	ln, err := net.Listen("tcp", addr)
	if !errors.Is(err, syscall.EADDRINUSE) || cfg.Port == 0 {
		if err != nil {
			return nil, fmt.Errorf("listen: %w", err)
		}
		return ln, nil
	}
	inUse := func(v string) error {
		who := fmt.Sprintf("another process holds it (ss -ltnp 'sport = :%d' names it)", cfg.Port)
		if v != "" {
			who = fmt.Sprintf("an agentd %s already serves http://%s (use it: agentd run --url http://%s)", v, addr, addr)
		}
		return fmt.Errorf("port %d on %s is in use: %s; stop it, or pick another port with --port (0: any free one)", cfg.Port, cfg.Host, who)
	}
	// A serving agentd answers its health in milliseconds: said at once.
	if v := agentdAt(addr, 300*time.Millisecond); v != "" {
		return nil, inUse(v)
	}
	for wait := time.Now().Add(portGrace); time.Now().Before(wait); {
		time.Sleep(50 * time.Millisecond)
		if ln, err = net.Listen("tcp", addr); !errors.Is(err, syscall.EADDRINUSE) {
			if err != nil {
				return nil, fmt.Errorf("listen: %w", err)
			}
			return ln, nil
		}
	}
	return nil, inUse(agentdAt(addr, time.Second))
}

// portGrace is how long a port held by something other than an agentd is
// tried again. A server killed (SIGKILL) while it was starting a tool
// leaves that child holding a copy of its listening socket until the
// child's exec closes it, milliseconds on a loaded machine; a restart
// right after the kill would otherwise fail on a port nothing serves.
const portGrace = 2 * time.Second

// agentdAt is the version of the agentd answering at addr, or "" when
// what answers (within timeout) is not one.
func agentdAt(addr string, timeout time.Duration) string {
	c := http.Client{Timeout: timeout}
	resp, err := c.Get("http://" + addr + "/global/health")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var h struct {
		Healthy *bool  `json:"healthy"`
		Version string `json:"version"`
	}
	if json.NewDecoder(resp.Body).Decode(&h) != nil || h.Healthy == nil || h.Version == "" {
		return ""
	}
	return h.Version
}
