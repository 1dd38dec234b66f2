// Package access is who may do what through the API: API keys (made,
// listed, revoked; a request's bearer token checked against them) and what
// a key sees. A key sees and changes only the sessions made through it
// unless it was granted all of them; everything the API answers about a
// session goes through one check, Keys.Sees, which both API dialects call
// (the v1 server's route dispatch for every route that names a session,
// the lists, the asks and the event streams; apiv2's likewise), so that a
// session a key may not see is indistinguishable from one that does not
// exist.
//
// A request without a key is the operator's: the password, or no
// authentication on a server that requires none. Keys never manage keys.
//
// Tokens are shown once, when made: the store keeps the SHA-256 of their
// secret, compared in constant time. A token names its key's id, so the
// key is read by id, never looked up by its secret. Keys are read again
// after at most Staleness, so a revocation on any node is refused on every
// node within it.
package access

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// Caller is a request's API key: its id, its name (for the access log)
// and whether it may see every session.
type Caller struct {
	KeyID string
	Name  string
	All   bool
}

type callerKey struct{}

// WithCaller returns ctx carrying the request's key.
func WithCaller(ctx context.Context, c *Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerOf returns the request's key, or nil for the operator.
func CallerOf(ctx context.Context) *Caller {
	c, _ := ctx.Value(callerKey{}).(*Caller)
	return c
}

// Owner is the owner a session made in ctx gets: the request's key's id,
// "" for the operator.
func Owner(ctx context.Context) string {
	if c := CallerOf(ctx); c != nil {
		return c.KeyID
	}
	return ""
}

// restricted returns the request's key when it sees only its own sessions.
func restricted(ctx context.Context) *Caller {
	if c := CallerOf(ctx); c != nil && !c.All {
		return c
	}
	return nil
}

// Sees reports whether the request may see the session: the operator and
// keys granted all sessions see every one, a key its own. A session that
// does not exist is not seen. The owner is read from the store each time
// (one row by its key), so that the answer is never stale.
func (k *Keys) Sees(ctx context.Context, sessionID string) (bool, error) {
	c := restricted(ctx)
	if c == nil || k == nil {
		return c == nil, nil
	}
	owner, err := k.st.SessionOwner(ctx, sessionID)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return owner == c.KeyID, nil
}

// ListOwner is the SessionQuery.Owner of the request's session lists: the
// key's id when it sees only its own, "" (all) otherwise.
func ListOwner(ctx context.Context) string {
	if c := restricted(ctx); c != nil {
		return c.KeyID
	}
	return ""
}

// Visible keeps the items whose session the request may see; session
// returns an item's session id.
func Visible[T any](ctx context.Context, k *Keys, items []T, session func(T) string) ([]T, error) {
	if restricted(ctx) == nil {
		return items, nil
	}
	out := items[:0:0]
	for _, it := range items {
		ok, err := k.Sees(ctx, session(it))
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, it)
		}
	}
	return out, nil
}

// operatorOnly are the routes no key may use, by the start of their path
// (and their method, where one is named): the keys themselves, the
// providers' credentials (the whole server's), the terminals (a shell on
// the server reaches every session's workspace), the control of the TUIs
// attached to the server (the operator's screens; their events reach
// every stream), and MCP servers added, connected or disconnected (the
// whole server's tools). What a key may read of the server (its
// configuration, its MCP servers' state) stays readable.
var operatorOnly = []string{"/key", "/auth/", "/api/credential/", "/api/integration/", "/pty", "/api/pty", "/tui",
	"POST /mcp", "DELETE /mcp", "POST /global/dispose",
	// A schedule prompts a session at every tick, with nobody's key:
	// only the operator makes them.
	"/schedule"}

// OperatorOnly reports whether the route (its method and pattern) is the
// operator's alone.
func OperatorOnly(method, pattern string) bool {
	for _, p := range operatorOnly {
		if m, path, ok := strings.Cut(p, " "); ok {
			if m != method {
				continue
			}
			p = path
		}
		if pattern == p || strings.HasPrefix(pattern, p) && (strings.HasSuffix(p, "/") || pattern[len(p)] == '/') {
			return true
		}
	}
	return false
}

// VisibleMap keeps the entries of m (by session id) the request may see.
func VisibleMap[V any](ctx context.Context, k *Keys, m map[string]V) (map[string]V, error) {
	if restricted(ctx) == nil {
		return m, nil
	}
	out := make(map[string]V, len(m))
	for id, v := range m {
		ok, err := k.Sees(ctx, id)
		if err != nil {
			return nil, err
		}
		if ok {
			out[id] = v
		}
	}
	return out, nil
}

// streamOwners bounds the owners an event stream remembers.
const streamOwners = 4096

// EventFilter returns what an event stream of the request keeps: the
// events of the sessions it may see and those of no session (the
// server's); nil when it sees everything. The stream remembers each
// session's owner (an owner never changes) and reads it again at the
// session's creation, since a deleted session's id may be given to a new
// one. A session deleted before the stream saw any of its events is gone
// from the store: its last events are not shown to a key.
func (k *Keys) EventFilter(ctx context.Context) func(core.Event) bool {
	c := restricted(ctx)
	if c == nil || k == nil {
		return nil
	}
	owners := map[string]string{}
	return func(ev core.Event) bool {
		if ev.SessionID == "" {
			return true
		}
		owner, ok := owners[ev.SessionID]
		if !ok || ev.Type == core.EventSessionCreated {
			o, err := k.st.SessionOwner(ctx, ev.SessionID)
			if err != nil {
				// Gone (or unreadable): not shown, and asked again at
				// the session's next event.
				return false
			}
			if len(owners) >= streamOwners {
				clear(owners)
			}
			owner, owners[ev.SessionID] = o, o
		}
		return owner == c.KeyID
	}
}

// watchEvery is how often Watch reads the key again; what it reads is at
// most Staleness old, so a revocation ends the stream within
// Staleness + watchEvery.
const watchEvery = Staleness / 2

// Watch returns a context that ends with ctx and, for a request made with
// a key, once the key is revoked (or gone): a stream opened with a key
// ends with its revocation, on every node, instead of serving the key for
// as long as the connection lasts. stop releases what Watch started and
// must be called.
func (k *Keys) Watch(ctx context.Context) (_ context.Context, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	c := CallerOf(ctx)
	if c == nil || k == nil {
		return ctx, cancel
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(watchEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			key, err := k.read(ctx, c.KeyID)
			if errors.Is(err, store.ErrNotFound) || err == nil && key.Revoked != 0 {
				cancel()
				return
			}
		}
	}()
	return ctx, func() { cancel(); <-done }
}
