package server

import (
	"crypto/subtle"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"
)

// Security is the access policy of the HTTP API.
type Security struct {
	// Username and Password enable HTTP basic auth when Password is set.
	Username string
	Password string
	// LoopbackOnly refuses requests whose Host is not a local name (DNS
	// rebinding).
	LoopbackOnly bool
	// Origins are the browser origins allowed besides the server's own
	// (opencode's --cors). A request with any other Origin is refused, in
	// every mode: a page of another site must not drive the server with
	// the user's network position or cached credentials.
	Origins []string
}

// IsLoopbackHost reports whether host (a name or an address, without port)
// names this machine by form: localhost, *.localhost or a loopback
// address. It does not resolve names.
func IsLoopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// ResolvesToLoopback reports whether every address host resolves to is a
// loopback address; a listener on such a host is reachable from this
// machine only.
func ResolvesToLoopback(host string) bool {
	if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return ip.IsLoopback()
	}
	ips, err := net.LookupIP(host)
	if err != nil || len(ips) == 0 {
		return false
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return false
		}
	}
	return true
}

func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}

// originAllowed reports whether a browser's Origin may use the API: the
// server's own origin (same scheme-less host and port as the request),
// or one configured.
func (s Security) originAllowed(origin string, r *http.Request) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	for _, o := range s.Origins {
		if strings.EqualFold(strings.TrimRight(o, "/"), strings.TrimRight(origin, "/")) {
			return true
		}
	}
	return false
}

// loginLimit bounds failed logins per client address.
const (
	loginFailures = 5
	loginWindow   = time.Minute
)

// guard is the middleware state: failed logins per address.
type guard struct {
	sec Security

	mu     sync.Mutex
	failed map[string][]time.Time
}

func (s Security) middleware(next http.Handler) http.Handler {
	g := &guard{sec: s, failed: map[string][]time.Time{}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.LoopbackOnly && !IsLoopbackHost(hostOnly(r.Host)) {
			writeError(w, &apiError{status: http.StatusForbidden, name: "ForbiddenError", msg: "host " + r.Host + " is not a local name; this server only answers on loopback"})
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !s.originAllowed(o, r) {
			writeError(w, &apiError{status: http.StatusForbidden, name: "ForbiddenError", msg: "cross-origin request from " + o + " refused (allow it with --cors)"})
			return
		}
		if s.Password != "" && !g.authorized(w, r) {
			return
		}
		// A write with a body must say it is JSON: an HTML form or a
		// text/plain fetch from a page cannot, without a preflight.
		if r.Method != http.MethodGet && r.Method != http.MethodHead && r.ContentLength != 0 {
			mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
			if err != nil || mt != "application/json" {
				writeError(w, &apiError{status: http.StatusUnsupportedMediaType, name: "UnsupportedMediaTypeError", msg: "request bodies must be JSON with Content-Type: application/json"})
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// authorized checks basic auth, refusing an address that failed too often.
func (g *guard) authorized(w http.ResponseWriter, r *http.Request) bool {
	addr := hostOnly(r.RemoteAddr)
	now := time.Now()
	g.mu.Lock()
	recent := g.failed[addr][:0]
	for _, t := range g.failed[addr] {
		if now.Sub(t) < loginWindow {
			recent = append(recent, t)
		}
	}
	if len(recent) == 0 {
		delete(g.failed, addr)
	} else {
		g.failed[addr] = recent
	}
	locked := len(recent) >= loginFailures
	g.mu.Unlock()
	if locked {
		w.Header().Set("Retry-After", fmt.Sprint(int(loginWindow.Seconds())))
		writeError(w, &apiError{status: http.StatusTooManyRequests, name: "TooManyRequestsError", msg: "too many failed logins from this address; try again later"})
		return false
	}
	user, pass, ok := r.BasicAuth()
	wantUser := g.sec.Username
	if wantUser == "" {
		wantUser = "opencode"
	}
	if ok && subtle.ConstantTimeCompare([]byte(user), []byte(wantUser)) == 1 &&
		subtle.ConstantTimeCompare([]byte(pass), []byte(g.sec.Password)) == 1 {
		return true
	}
	if ok {
		g.mu.Lock()
		g.failed[addr] = append(g.failed[addr], now)
		g.mu.Unlock()
	}
	w.Header().Set("WWW-Authenticate", `Basic realm="agentd"`)
	writeError(w, &apiError{status: http.StatusUnauthorized, name: "UnauthorizedError", msg: "authentication required"})
	return false
}

// cleanPaths answers a path that is not in its clean form (".." or "."
// segments, doubled slashes) with a JSON 404 instead of the mux's
// redirect.
func cleanPaths(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if p != "/" && (path.Clean(p) != p || strings.HasSuffix(p, "/")) {
			writeError(w, notFound("no route for %s %s", r.Method, p))
			return
		}
		next.ServeHTTP(w, r)
	})
}
