// Package tuictl is the queue behind opencode's TUI control routes: every
// request a client makes of a TUI (append to the prompt, run a command,
// show a toast, select a session …) is kept here, besides being published
// as a live event, for a client that drives its own interface by polling
// GET /tui/control/next instead of following the event stream.
//
// The queue is bounded twice, so that requests nobody polls for do not
// pile up: it holds at most Max requests (the oldest go first) and a
// request older than TTL is dropped when read (a TUI that follows the
// event stream has shown it long ago).
package tuictl

import (
	"context"
	"encoding/json"
	"sync"
	"time"
)

// Defaults of a Queue.
const (
	DefaultMax = 64
	DefaultTTL = time.Minute
)

// Request is one request made of a TUI: the route it came in by and its
// body, as opencode's control queue answers it.
type Request struct {
	Path string          `json:"path"`
	Body json.RawMessage `json:"body"`
}

type entry struct {
	req Request
	at  time.Time
}

// Queue holds the requests made of TUIs until a poller takes them. The
// zero value is not usable: use New.
type Queue struct {
	max int
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	items   []entry
	wake    chan struct{} // closed, and replaced, when a request arrives
	dropped int
}

// New returns an empty queue holding at most max requests (0: DefaultMax)
// for at most ttl (0: DefaultTTL); now is the clock (nil: time.Now).
func New(max int, ttl time.Duration, now func() time.Time) *Queue {
	if max <= 0 {
		max = DefaultMax
	}
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if now == nil {
		now = time.Now
	}
	return &Queue{max: max, ttl: ttl, now: now, wake: make(chan struct{})}
}

// Push adds a request, dropping the oldest one when the queue is full, and
// wakes the pollers.
func (q *Queue) Push(r Request) {
	if len(r.Body) == 0 {
		r.Body = json.RawMessage("null")
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) == q.max {
		q.items = q.items[1:]
		q.dropped++
	}
	q.items = append(q.items, entry{req: r, at: q.now()})
	close(q.wake)
	q.wake = make(chan struct{})
}

// take removes and returns the oldest request still fresh; ok is false
// when there is none, and wake is then closed by the next Push.
func (q *Queue) take() (r Request, ok bool, wake <-chan struct{}) {
	q.mu.Lock()
	defer q.mu.Unlock()
	cutoff := q.now().Add(-q.ttl)
	for len(q.items) > 0 {
		e := q.items[0]
		q.items = q.items[1:]
		if e.at.Before(cutoff) {
			q.dropped++
			continue
		}
		return e.req, true, nil
	}
	q.items = nil
	return Request{}, false, q.wake
}

// Next returns the oldest fresh request, waiting for one until ctx ends
// (then it returns ctx's error). Each request goes to one poller.
func (q *Queue) Next(ctx context.Context) (Request, error) {
	for {
		r, ok, wake := q.take()
		if ok {
			return r, nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return Request{}, ctx.Err()
		}
	}
}

// Len returns how many requests wait (stale ones included).
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

// Dropped returns how many requests were dropped unread: pushed out of a
// full queue or gone stale.
func (q *Queue) Dropped() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.dropped
}
