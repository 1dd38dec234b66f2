package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/agentd/agentd/internal/core"
)

// The event hook's delivery. Committed events and live-only ones (streamed
// text as message.part.delta, live part updates, toasts, TUI requests)
// go to the host in the order they happened, through one bounded queue
// that a goroutine of the host drains, so that neither a commit nor the
// stream ever waits for a plugin:
//
//   - the host says how many events it has taken in (events.seen, once per
//     burst it read), and no more than eventWindow are ever on their way,
//     so the pipe to the host never fills with events and a hook call is
//     never written behind them;
//   - while the host is behind, events wait in the queue; a live-only
//     event that finds maxLiveQueued events waiting is dropped, a
//     committed one only past maxQueued; each drop is counted
//     (EventsDropped) and logged, with the count, once the queue drains.
//
// The host, in turn, calls each event hook without awaiting it, as opencode
// does, and drops events for a plugin that has eventHooksPending of them
// still running (host.js).
const (
	eventWindow   = 256
	maxLiveQueued = 4096
	maxQueued     = 16384
)

// eventQueue holds the events on their way to the host.
type eventQueue struct {
	mu      sync.Mutex
	items   []core.Event
	head    int
	wake    chan struct{}
	dropped atomic.Int64
	// seen is where the host's events.seen notifications wake the sender.
	seen chan struct{}
}

func newEventQueue() *eventQueue {
	return &eventQueue{wake: make(chan struct{}, 1), seen: make(chan struct{}, 1)}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// push queues evs, dropping what is over the bounds.
func (q *eventQueue) push(live bool, evs ...core.Event) {
	q.mu.Lock()
	for _, ev := range evs {
		n := len(q.items) - q.head
		if n >= maxQueued || (live && n >= maxLiveQueued) {
			q.dropped.Add(1)
			continue
		}
		q.items = append(q.items, ev)
	}
	q.mu.Unlock()
	signal(q.wake)
}

// take removes up to n events from the queue.
func (q *eventQueue) take(n int, into []core.Event) []core.Event {
	q.mu.Lock()
	defer q.mu.Unlock()
	end := min(q.head+n, len(q.items))
	into = append(into, q.items[q.head:end]...)
	clear(q.items[q.head:end])
	q.head = end
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
	return into
}

// clear drops every queued event (the host they were for is gone).
func (q *eventQueue) clear() {
	q.mu.Lock()
	clear(q.items)
	q.items, q.head = q.items[:0], 0
	q.mu.Unlock()
}

// Live hands a live-only event to the plugins' event hooks, without
// waiting (see eventQueue); the hub calls it for each one it publishes.
func (h *Host) Live(ev core.Event) {
	if !h.wantEvents.Load() {
		return
	}
	if ev.ID == "" {
		ev.ID = core.NewID(core.PrefixEvent, false)
	}
	h.events.push(true, ev)
}

// EventsDropped counts the events the plugins' event hooks missed because
// the host was behind (a slow plugin).
func (h *Host) EventsDropped() int64 { return h.events.dropped.Load() }

// sendEvents writes the queued events to the host until ctx ends.
func (h *Host) sendEvents(ctx context.Context) {
	var (
		last     *proc
		sent     int64
		reported int64
		batch    []core.Event
		line     []byte
	)
	for {
		select {
		case <-h.events.wake:
		case <-ctx.Done():
			return
		}
		for {
			p := h.running()
			if p == nil {
				h.events.clear() // a host that is restarting misses them
				break
			}
			if p != last {
				last, sent = p, 0
			}
			room := eventWindow - int(sent-p.eventsSeen.Load())
			if room <= 0 {
				select {
				case <-h.events.seen:
				case <-p.exited:
				case <-ctx.Done():
					return
				}
				continue
			}
			batch = h.events.take(min(room, 64), batch[:0])
			if len(batch) == 0 {
				break
			}
			line = line[:0]
			for _, ev := range batch {
				line = appendEvent(line, ev)
			}
			if err := p.conn.writeRaw(line); err != nil {
				h.events.clear()
				break
			}
			sent += int64(len(batch))
		}
		if d := h.events.dropped.Load(); d > reported {
			h.log.Warn("the plugins' event hooks are behind: events dropped", "dropped", d-reported, "total", d)
			reported = d
		}
	}
}

// appendEvent appends the notification of one event, written by hand: the
// properties are JSON already, and a streamed answer sends one per delta.
func appendEvent(b []byte, ev core.Event) []byte {
	start := len(b)
	b = append(b, `{"method":"event","params":{"event":{"id":`...)
	b = strconv.AppendQuote(b, ev.ID)
	b = append(b, `,"type":`...)
	b = strconv.AppendQuote(b, ev.Type)
	b = append(b, `,"properties":`...)
	switch {
	case len(ev.Properties) == 0:
		b = append(b, "{}"...)
	case bytes.IndexByte(ev.Properties, '\n') >= 0:
		var c bytes.Buffer
		if json.Compact(&c, ev.Properties) != nil {
			return b[:start]
		}
		b = append(b, c.Bytes()...)
	default:
		b = append(b, ev.Properties...)
	}
	return append(b, "}}}\n"...)
}

// eventsSeen reads the host's events.seen notification.
func (p *proc) eventsSeenFrom(params json.RawMessage, wake chan struct{}) {
	var s struct {
		N int64 `json:"n"`
	}
	if json.Unmarshal(params, &s) == nil {
		p.eventsSeen.Store(s.N)
		signal(wake)
	}
}
