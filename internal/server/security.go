package server

import (
	"crypto/subtle"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// Security is the access policy of the HTTP API.
type Security struct {
	// Username and Password enable HTTP basic auth when Password is set.
	Username string
	Password string
	// LoopbackOnly refuses requests whose Host is not a local name, and
	// browser requests from non-local origins (DNS rebinding, cross-site
	// requests).
	LoopbackOnly bool
}

// IsLoopbackHost reports whether host (a name or an address, without port)
// refers to this machine.
func IsLoopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}

func (s Security) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.LoopbackOnly {
			if !IsLoopbackHost(hostOnly(r.Host)) {
				writeError(w, &apiError{http.StatusForbidden, "ForbiddenError", "host " + r.Host + " is not a local name; this server only answers on loopback"})
				return
			}
			if o := r.Header.Get("Origin"); o != "" {
				u, err := url.Parse(o)
				if err != nil || !IsLoopbackHost(u.Hostname()) {
					writeError(w, &apiError{http.StatusForbidden, "ForbiddenError", "cross-origin request from " + o + " refused"})
					return
				}
			}
		}
		if s.Password != "" {
			user, pass, ok := r.BasicAuth()
			wantUser := s.Username
			if wantUser == "" {
				wantUser = "opencode"
			}
			if !ok || subtle.ConstantTimeCompare([]byte(user), []byte(wantUser)) != 1 ||
				subtle.ConstantTimeCompare([]byte(pass), []byte(s.Password)) != 1 {
				w.Header().Set("WWW-Authenticate", `Basic realm="agentd"`)
				writeError(w, &apiError{http.StatusUnauthorized, "UnauthorizedError", "authentication required"})
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
