package server

import (
	"context"
	"crypto/subtle"
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

// Failed logins slow down the next failures from the same address: past
// loginFree failures within loginWindow, each wrong answer waits (twice
// as long each time, up to loginMaxDelay) and the waits of one address
// take turns, so guessing from one address is slowed to one try per
// delay however many connections it opens. A correct password is never
// delayed or refused: failures by someone else from that address (or
// behind the same proxy) cannot lock the owner out.
const (
	loginFree     = 5
	loginWindow   = time.Minute
	loginBaseWait = 100 * time.Millisecond
	loginMaxDelay = 5 * time.Second
	// loginAddrs bounds the addresses remembered; the oldest entries
	// go first.
	loginAddrs = 10000
)

// guard is the middleware state: failed logins per address.
type guard struct {
	sec Security

	mu     sync.Mutex
	failed map[string]*failures
}

// failures are one address's recent failed logins, and its turn to wait.
type failures struct {
	times []time.Time
	turn  chan struct{}
}

// loginDelay is how long the n-th recent failure waits.
func loginDelay(n int) time.Duration {
	if n <= loginFree {
		return 0
	}
	d := loginBaseWait << min(n-loginFree-1, 10)
	return min(d, loginMaxDelay)
}

// fail records a failed login from addr and returns its delay and turn.
func (g *guard) fail(addr string, now time.Time) (time.Duration, chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f := g.failed[addr]
	if f == nil {
		if len(g.failed) >= loginAddrs {
			g.forgetOldest(now)
		}
		f = &failures{turn: make(chan struct{}, 1)}
		g.failed[addr] = f
	}
	recent := f.times[:0]
	for _, t := range f.times {
		if now.Sub(t) < loginWindow {
			recent = append(recent, t)
		}
	}
	f.times = append(recent, now)
	return loginDelay(len(f.times)), f.turn
}

// forgetOldest drops the addresses whose failures have all expired, or,
// when none has, the one whose latest failure is oldest.
func (g *guard) forgetOldest(now time.Time) {
	oldest, at := "", now
	for addr, f := range g.failed {
		last := f.times[len(f.times)-1]
		if now.Sub(last) >= loginWindow {
			delete(g.failed, addr)
			continue
		}
		if last.Before(at) {
			oldest, at = addr, last
		}
	}
	if len(g.failed) >= loginAddrs {
		delete(g.failed, oldest)
	}
}

func (s Security) middleware(next http.Handler) http.Handler {
	g := &guard{sec: s, failed: map[string]*failures{}}
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

// authorized checks basic auth. A wrong password is answered after the
// delay its address has earned (see loginFree).
func (g *guard) authorized(w http.ResponseWriter, r *http.Request) bool {
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
		delay, turn := g.fail(hostOnly(r.RemoteAddr), time.Now())
		if delay > 0 && !wait(r.Context(), turn, delay) {
			return false
		}
	}
	w.Header().Set("WWW-Authenticate", `Basic realm="agentd"`)
	writeError(w, &apiError{status: http.StatusUnauthorized, name: "UnauthorizedError", msg: "authentication required"})
	return false
}

// wait takes the address's turn and holds it for d; false when the
// client went away first.
func wait(ctx context.Context, turn chan struct{}, d time.Duration) bool {
	select {
	case turn <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	defer func() { <-turn }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// cleanPaths answers a path that is not in its clean form (".." or "."
// segments, doubled slashes) with a JSON 404 instead of the mux's
// redirect.
func cleanPaths(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if p == "/ui/" {
			http.Redirect(w, r, "/ui", http.StatusMovedPermanently)
			return
		}
		if p != "/" && (path.Clean(p) != p || strings.HasSuffix(p, "/")) {
			writeError(w, notFound("no route for %s %s", r.Method, p))
			return
		}
		next.ServeHTTP(w, r)
	})
}
