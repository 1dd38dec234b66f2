package server

import (
	"crypto/subtle"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentd/agentd/internal/access"
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

// Failed logins slow down the next failures from the same address, without
// holding a connection while they do: past loginFree failures within
// loginWindow, a wrong answer is answered at once (401) with a Retry-After
// of the delay it earned (twice as long each time, up to loginMaxDelay),
// and until that delay has passed every further failure from the address
// is refused at once (429, the same Retry-After) without counting. A
// failure used to wait out its delay on its connection, so wrong
// passwords filled the connection cap and the owner's right one got 503.
// A correct password is checked first and never delayed or refused:
// failures by someone else from that address (or behind the same proxy)
// cannot lock the owner out. (Nothing that answers the right password at
// once can stop guessing in parallel; a long random password does.)
const (
	loginFree     = 5
	loginWindow   = time.Minute
	loginBaseWait = 100 * time.Millisecond
	loginMaxDelay = 5 * time.Second
	// loginAddrs bounds the addresses remembered; the oldest entries
	// go first.
	loginAddrs = 10000
)

// guard is the middleware state: failed logins per address, and the
// terminals' connect tickets.
type guard struct {
	sec Security
	now func() time.Time
	// tickets spends a terminal's connect ticket, reporting whether it was
	// valid for that terminal.
	tickets func(ticket, pty string) bool
	// keys checks bearer tokens (nil: none are accepted).
	keys *access.Keys

	mu     sync.Mutex
	failed map[string]*failures
}

// failures are one address's recent failed logins, and the end of the
// delay its last one earned.
type failures struct {
	times []time.Time
	until time.Time
}

// loginDelay is how long the n-th recent failure delays the next.
func loginDelay(n int) time.Duration {
	if n <= loginFree {
		return 0
	}
	d := loginBaseWait << min(n-loginFree-1, 10)
	return min(d, loginMaxDelay)
}

// fail records a failed login from addr: how long the address must wait
// before its next failure is heard, and whether this one came while it
// was still waiting (refused, not counted).
func (g *guard) fail(addr string, now time.Time) (time.Duration, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f := g.failed[addr]
	if f == nil {
		if len(g.failed) >= loginAddrs {
			g.forgetOldest(now)
		}
		f = &failures{}
		g.failed[addr] = f
	}
	if now.Before(f.until) {
		return f.until.Sub(now), true
	}
	recent := f.times[:0]
	for _, t := range f.times {
		if now.Sub(t) < loginWindow {
			recent = append(recent, t)
		}
	}
	f.times = append(recent, now)
	d := loginDelay(len(f.times))
	f.until = now.Add(d)
	return d, false
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

func (s Security) middleware(next http.Handler, tickets func(ticket, pty string) bool, keys *access.Keys) http.Handler {
	g := &guard{sec: s, now: time.Now, failed: map[string]*failures{}, tickets: tickets, keys: keys}
	return g.handler(next)
}

func (g *guard) handler(next http.Handler) http.Handler {
	s := g.sec
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.LoopbackOnly && !IsLoopbackHost(hostOnly(r.Host)) {
			writeError(w, &apiError{status: http.StatusForbidden, name: "ForbiddenError", msg: "host " + r.Host + " is not a local name; this server only answers on loopback"})
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !s.originAllowed(o, r) {
			writeError(w, &apiError{status: http.StatusForbidden, name: "ForbiddenError", msg: "cross-origin request from " + o + " refused (allow it with --cors)"})
			return
		}
		if id, ticket, ok := connectTicket(r); ok {
			// A terminal's websocket with a ticket: a browser cannot put
			// the password on a websocket, so it asked for a ticket with
			// it (an authenticated request). The ticket is spent here,
			// whatever follows; one not valid for this terminal is
			// refused even where no password is set.
			if g.tickets == nil || !g.tickets(ticket, id) {
				writeError(w, ticketRefused(r.URL.Path))
				return
			}
		} else if tok, ok := bearer(r); ok && g.keys != nil {
			// An API key, beside the password: the request is the key's.
			if r, ok = g.authenticateKey(w, r, tok); !ok {
				return
			}
		} else if s.Password != "" && !g.authorized(w, r) {
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

// authorized checks basic auth. A wrong password is answered at once:
// 401 with the delay its address has earned as Retry-After, or 429 while
// an earlier failure's delay runs (see loginFree).
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
	if ok && g.loginFailed(w, r) {
		return false
	}
	w.Header().Set("WWW-Authenticate", `Basic realm="agentd"`)
	writeError(w, &apiError{status: http.StatusUnauthorized, name: "UnauthorizedError", msg: "authentication required"})
	return false
}

// loginFailed counts a failed login of the request's address and sets the
// Retry-After it earned; true when it was refused (429, answered here)
// because an earlier failure's delay still runs.
func (g *guard) loginFailed(w http.ResponseWriter, r *http.Request) bool {
	delay, refused := g.fail(hostOnly(r.RemoteAddr), g.now())
	if delay > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((delay+time.Second-1)/time.Second)))
	}
	if refused {
		writeError(w, &apiError{status: http.StatusTooManyRequests, name: "TooManyRequestsError",
			msg: "too many failed logins from this address; wait for Retry-After before trying again"})
	}
	return refused
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
