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
	if errors.Is(err, syscall.EADDRINUSE) {
		who := fmt.Sprintf("another process holds it (ss -ltnp 'sport = :%d' names it)", cfg.Port)
		if v := agentdAt(addr); v != "" {
			who = fmt.Sprintf("an agentd %s already serves http://%s (use it: agentd run --url http://%s)", v, addr, addr)
		}
		return nil, fmt.Errorf("port %d on %s is in use: %s; stop it, or pick another port with --port (0: any free one)", cfg.Port, cfg.Host, who)
	}
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	return ln, nil
}

// agentdAt is the version of the agentd answering at addr, or "" when
// what answers (within a second) is not one.
func agentdAt(addr string) string {
	c := http.Client{Timeout: time.Second}
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
