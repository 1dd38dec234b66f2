package pty

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"sync"
	"time"
)

// Ticket is a connect token: it opens one terminal's websocket once,
// within ExpiresIn seconds (opencode's PtyTicketConnectToken). A browser
// cannot put the server's password on a websocket; it asks for a ticket
// with it (an authenticated request that a page of another site cannot
// make) and puts the ticket in the websocket's URL instead.
type Ticket struct {
	Ticket    string `json:"ticket"`
	ExpiresIn int    `json:"expires_in"`
}

// Limits of the tickets.
const (
	// TicketTTL is how long a ticket is valid (opencode's 60 s).
	TicketTTL = time.Minute
	// maxTickets bounds the tickets held; past it the oldest are dropped.
	maxTickets = 1024
)

// tickets are the unused, unexpired tickets.
type tickets struct {
	ttl time.Duration
	now func() time.Time

	mu   sync.Mutex
	byID map[string]ticket
}

type ticket struct {
	pty     string
	expires time.Time
}

func newTickets(ttl time.Duration, now func() time.Time) *tickets {
	return &tickets{ttl: ttl, now: now, byID: map[string]ticket{}}
}

// issue makes a ticket for the terminal pty.
func (t *tickets) issue(pty string) Ticket {
	var b [24]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expire(now)
	for len(t.byID) >= maxTickets {
		t.dropOldest()
	}
	t.byID[id] = ticket{pty: pty, expires: now.Add(t.ttl)}
	return Ticket{Ticket: id, ExpiresIn: max(1, int(t.ttl/time.Second))}
}

// consume reports whether id is a valid ticket for pty, and spends it:
// a ticket opens one connection, and a ticket for another terminal is
// spent too (whoever holds it tried it where it does not open).
func (t *tickets) consume(id, pty string) bool {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	tk, ok := t.byID[id]
	if !ok {
		return false
	}
	delete(t.byID, id)
	return now.Before(tk.expires) && subtle.ConstantTimeCompare([]byte(tk.pty), []byte(pty)) == 1
}

// forget drops the tickets of a terminal that is gone.
func (t *tickets) forget(pty string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, tk := range t.byID {
		if tk.pty == pty {
			delete(t.byID, id)
		}
	}
}

func (t *tickets) expire(now time.Time) {
	for id, tk := range t.byID {
		if !now.Before(tk.expires) {
			delete(t.byID, id)
		}
	}
}

func (t *tickets) dropOldest() {
	oldest, at := "", time.Time{}
	for id, tk := range t.byID {
		if oldest == "" || tk.expires.Before(at) {
			oldest, at = id, tk.expires
		}
	}
	delete(t.byID, oldest)
}
