// Package events delivers agentd's event log to subscribers.
//
// Delivery contract:
//
//   - Durable events (seq > 0) are never pushed into per-subscriber queues.
//     Each subscriber keeps a cursor and pulls what follows it, from an
//     in-memory ring of recent events or, when it has fallen further behind,
//     from the store. A slow subscriber therefore never blocks a writer and
//     never grows memory: it is simply behind, and catches up by replay.
//   - Publish is called by the store after each commit, in seq order; it only
//     appends to the ring and wakes waiters.
//   - Live-only events (message.part.delta) go through a small bounded queue
//     per subscriber and are dropped when that queue is full; Dropped counts
//     them. Clients that miss a delta still get the full text in the durable
//     message.part.updated that follows.
//   - A stream keeps the order in which its hub saw live-only and durable
//     events: a live event published when the hub's head was at seq N goes
//     out before any durable event after N. Without it a stream waking for a
//     commit sent a part's final text and then the deltas that preceded it,
//     and a client appending deltas showed the text twice.
package events

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// DefaultRingSize is how many recent durable events the hub keeps in memory.
const DefaultRingSize = 16384

// RingBytes bounds the memory of the ring's events (their properties and
// ids): events are as large as what clients send (a prompt's text, a
// title), and a count alone let a few large ones hold a gigabyte. A
// reader behind the ring reads from the store.
const RingBytes = 32 << 20

// eventBytes is what an event costs the ring: its encoded properties, its
// strings, and the slot.
func eventBytes(ev core.Event) int {
	return len(ev.Properties) + len(ev.ID) + len(ev.Type) + len(ev.SessionID) + 80
}

// liveQueue is the per-subscriber buffer for live-only events.
const liveQueue = 256

// Hub fans the event log out to subscribers.
type Hub struct {
	st store.Reader

	mu      sync.RWMutex
	ring    []core.Event // ring[i] has seq ringStart+i
	start   int64
	head    int64
	size    int
	bytes   int // eventBytes of the ring's events
	changed chan struct{}
	// watch holds, per session, a channel closed when the next event that
	// changes that session's state is published: a waiter is not woken by
	// the streamed text of its own session or by every other session.
	watch map[string]chan struct{}

	subMu sync.Mutex
	subs  map[*Subscription]struct{}
	// sent is closed (and replaced) whenever a stream has sent more of
	// the log; WaitDelivered waits on it.
	sent chan struct{}

	dropped   atomic.Int64
	delivered atomic.Int64
	// onLive is told of every live-only event (see OnLive).
	onLive atomic.Pointer[func(core.Event)]
}

// NewHub returns a hub reading missed events from st, whose log currently
// ends at lastSeq.
func NewHub(st store.Reader, lastSeq int64, ringSize int) *Hub {
	if ringSize <= 0 {
		ringSize = DefaultRingSize
	}
	return &Hub{
		st: st, start: lastSeq + 1, head: lastSeq, size: ringSize,
		changed: make(chan struct{}),
		watch:   make(map[string]chan struct{}),
		subs:    make(map[*Subscription]struct{}),
		sent:    make(chan struct{}),
	}
}

// Publish records committed durable events and wakes every waiter. The
// events must follow the last published one without a hole; if they do not
// (another node wrote in between), the ring restarts and readers fall back
// to the store.
func (h *Hub) Publish(evs []core.Event) {
	if len(evs) == 0 {
		return
	}
	h.mu.Lock()
	for _, ev := range evs {
		if ev.Seq <= h.head {
			continue
		}
		if ev.Seq != h.head+1 {
			clear(h.ring)
			h.ring = h.ring[:0]
			h.start = ev.Seq
			h.bytes = 0
		}
		size := eventBytes(ev)
		if len(h.ring) >= h.size || h.bytes+size > RingBytes {
			h.trim(size)
		}
		h.ring = append(h.ring, ev)
		h.bytes += size
		h.head = ev.Seq
		if w, ok := h.watch[ev.SessionID]; ok && core.ChangesState(ev.Type) {
			close(w)
			delete(h.watch, ev.SessionID)
		}
	}
	ch := h.changed
	h.changed = make(chan struct{})
	h.mu.Unlock()
	close(ch)
}

// trim drops the oldest events until at most half the ring's count and
// half its bytes (less the incoming event's) are left, at once, so that
// trimming is amortised.
func (h *Hub) trim(incoming int) {
	drop := 0
	for drop < len(h.ring) && (len(h.ring)-drop > h.size/2 || h.bytes+incoming > RingBytes/2) {
		h.bytes -= eventBytes(h.ring[drop])
		drop++
	}
	n := copy(h.ring, h.ring[drop:])
	clear(h.ring[n:])
	h.ring = h.ring[:n]
	h.start += int64(drop)
}

// Watch returns a channel closed when a durable event of the session that
// changes its state (core.ChangesState) is published after the call.
// Callers watch first and then read the state they wait on, so that
// nothing committed in between is missed. A watched session that never
// changes again keeps one entry until it is deleted.
func (h *Hub) Watch(sessionID string) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	w, ok := h.watch[sessionID]
	if !ok {
		w = make(chan struct{})
		h.watch[sessionID] = w
	}
	return w
}

// Head returns the last known seq and a channel closed when it moves.
func (h *Hub) Head() (int64, <-chan struct{}) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.head, h.changed
}

// Recent returns the cursor from which a stream sees the durable events
// committed since the given moment, as far back as the ring reaches; last
// bounds it. A client usually subscribes and then acts (sends a prompt),
// but its two requests may reach the server in the other order; starting
// a little in the past keeps it from missing the start of what it caused.
// It never reaches back past a fork (session.forked ends a fork's
// transaction): a client forks before it subscribes, and the fork's
// copies of earlier messages are not output of what it does next.
func (h *Hub) Recent(since time.Time, last int64) int64 {
	cutoff := since.UnixMilli()
	h.mu.RLock()
	defer h.mu.RUnlock()
	cursor := min(last, h.head)
	for i := int(cursor - h.start); i >= 0 && i < len(h.ring); i-- {
		if h.ring[i].Time < cutoff || h.ring[i].Type == core.EventSessionForked {
			break
		}
		cursor = h.ring[i].Seq - 1
	}
	return cursor
}

// Read returns up to max durable events with seq > after, restricted to one
// session when sessionID is set, and the seq up to which the log has been
// examined (the next Read may start there). It serves from memory when it
// can and from the store otherwise. When retention has pruned events after
// the cursor it returns a *GapError instead, and reading goes on from
// GapError.First-1.
func (h *Hub) Read(ctx context.Context, after int64, sessionID string, max int) ([]core.Event, int64, error) {
	h.mu.RLock()
	head := h.head
	if after+1 >= h.start && after <= head {
		var out []core.Event
		through := after
		size := 0
		for i := int(after + 1 - h.start); i < len(h.ring) && len(out) < max && size < MaxBatchBytes; i++ {
			ev := h.ring[i]
			through = ev.Seq
			if sessionID != "" && ev.SessionID != sessionID {
				continue
			}
			out = append(out, ev)
			size += len(ev.Properties)
		}
		h.mu.RUnlock()
		return out, through, nil
	}
	h.mu.RUnlock()
	evs, err := h.st.Events(ctx, store.EventQuery{After: after, SessionID: sessionID, Limit: max, MaxBytes: MaxBatchBytes})
	if err != nil {
		return nil, after, err
	}
	if len(evs) == 0 || evs[0].Seq > after+1 {
		// Retention may have pruned events after the cursor, between
		// the reader's last read and this one. Events the query returned
		// from below the retained start prove it ran before the prune.
		first, _, err := h.st.EventBounds(ctx)
		if err != nil {
			return nil, after, err
		}
		if first > after+1 && (len(evs) == 0 || evs[0].Seq >= first) {
			return nil, after, &GapError{After: after, First: first}
		}
	}
	if len(evs) == max || bytesOf(evs) >= MaxBatchBytes {
		return evs, evs[len(evs)-1].Seq, nil
	}
	// Every event up to head was committed before the query ran, so the
	// query saw all of them.
	through := max64(after, head)
	if len(evs) > 0 {
		through = max64(through, evs[len(evs)-1].Seq)
	}
	return evs, through, nil
}

// GapError reports that the events after After and before First are no
// longer in the log (retention pruned them).
type GapError struct {
	After, First int64
}

func (e *GapError) Error() string {
	return fmt.Sprintf("events %d to %d were pruned", e.After+1, e.First-1)
}

// MaxBatchBytes bounds the events one read returns by their size, so that
// a subscriber replaying large events holds a bounded amount of memory.
const MaxBatchBytes = 1 << 20

func bytesOf(evs []core.Event) int {
	n := 0
	for _, ev := range evs {
		n += len(ev.Properties)
	}
	return n
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// Subscription receives live-only events.
type Subscription struct {
	hub       *Hub
	sessionID string
	ch        chan liveEvent
	once      sync.Once
	// delivered is the seq up to which the subscriber's stream has sent
	// the log (-1 until it knows its position).
	delivered atomic.Int64
}

// liveEvent is a live-only event with the hub's head when it was
// published: it belongs before every durable event after that head.
type liveEvent struct {
	ev    core.Event
	after int64
}

// Subscribe registers for live-only events, of one session when sessionID
// is set.
func (h *Hub) Subscribe(sessionID string) *Subscription {
	s := &Subscription{hub: h, sessionID: sessionID, ch: make(chan liveEvent, liveQueue)}
	s.delivered.Store(-1)
	h.subMu.Lock()
	h.subs[s] = struct{}{}
	h.subMu.Unlock()
	return s
}

// Delivered records that the subscriber's stream has sent (or had nothing
// to send) everything up to seq.
func (s *Subscription) Delivered(seq int64) {
	if s.delivered.Load() >= seq {
		return
	}
	s.delivered.Store(seq)
	s.hub.wakeSent()
}

// wakeSent wakes the WaitDelivered callers to look at the streams again.
func (h *Hub) wakeSent() {
	h.subMu.Lock()
	ch := h.sent
	h.sent = make(chan struct{})
	h.subMu.Unlock()
	close(ch)
}

// WaitDelivered waits until every open stream has sent the log up to seq,
// for at most max (a slow stream does not hold a caller longer), or until
// ctx ends. It reports whether any stream is open. A stream still finding
// its position (it subscribed, its first read is to come) is waited for
// too: it was opened before the caller's events were all committed, and
// may start before them (StreamOptions.LiveWindow); a client that opens
// the stream and then sends a prompt expects the prompt's events there,
// even when the prompt's request overtook the stream's.
func (h *Hub) WaitDelivered(ctx context.Context, seq int64, max time.Duration) (streams bool) {
	t := time.NewTimer(max)
	defer t.Stop()
	for {
		h.subMu.Lock()
		behind := false
		for s := range h.subs {
			streams = true
			if s.delivered.Load() < seq {
				behind = true
				break
			}
		}
		ch := h.sent
		h.subMu.Unlock()
		if !behind {
			return streams
		}
		select {
		case <-ch:
		case <-t.C:
			return streams
		case <-ctx.Done():
			return streams
		}
	}
}

// Close unregisters the subscription. It is idempotent.
func (s *Subscription) Close() {
	s.once.Do(func() {
		s.hub.subMu.Lock()
		delete(s.hub.subs, s)
		s.hub.subMu.Unlock()
		// A caller of WaitDelivered no longer waits for it.
		s.hub.wakeSent()
	})
}

// PublishLive offers a live-only event to every matching subscriber without
// blocking; subscribers whose queue is full miss it.
func (h *Hub) PublishLive(ev core.Event) {
	if f := h.onLive.Load(); f != nil {
		(*f)(ev)
	}
	h.mu.RLock()
	le := liveEvent{ev: ev, after: h.head}
	h.mu.RUnlock()
	h.subMu.Lock()
	defer h.subMu.Unlock()
	for s := range h.subs {
		if s.sessionID != "" && s.sessionID != ev.SessionID {
			continue
		}
		select {
		case s.ch <- le:
		default:
			h.dropped.Add(1)
		}
	}
}

// OnLive has f told of every live-only event as it is published (the
// plugins' event hook); f must not block.
func (h *Hub) OnLive(f func(core.Event)) { h.onLive.Store(&f) }

// Dropped returns how many live-only events were dropped for slow
// subscribers.
func (h *Hub) Dropped() int64 { return h.dropped.Load() }

// Delivered returns how many events (durable, live-only and the stream's
// own) the hub's streams have written to their clients.
func (h *Hub) Delivered() int64 { return h.delivered.Load() }

// Subscribers returns the number of live subscriptions.
func (h *Hub) Subscribers() int {
	h.subMu.Lock()
	defer h.subMu.Unlock()
	return len(h.subs)
}
