package events

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/agentd/agentd/internal/core"
)

// ErrBadCursor reports a malformed Last-Event-ID or after parameter.
var ErrBadCursor = errors.New("bad event cursor")

// ParseCursor reads the replay position from Last-Event-ID or ?after=. It
// returns ok=false when the client gave none (live from now).
func ParseCursor(r *http.Request) (after int64, ok bool, err error) {
	v := r.URL.Query().Get("after")
	src := "after"
	if v == "" {
		v = r.Header.Get("Last-Event-ID")
		src = "Last-Event-ID"
	}
	if v == "" {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return 0, false, fmt.Errorf("%w: %s must be a non-negative event sequence number, got %q", ErrBadCursor, src, v)
	}
	return n, true, nil
}

// StreamOptions configures one SSE stream.
type StreamOptions struct {
	// After is the cursor; HasCursor false means "live from now", where
	// now reaches back LiveWindow (see Hub.Recent).
	After     int64
	HasCursor bool
	// LiveWindow is how far back a stream without a cursor starts
	// (default 300 ms): long enough to cover a client's subscription and
	// prompt crossing on their way in, short enough not to replay the end
	// of the session's previous turn as if it were the new one's (opencode
	// run started right after another then took that idle for its own).
	LiveWindow time.Duration
	// SessionID restricts the stream to one session.
	SessionID string
	// Heartbeat is the interval of server.heartbeat frames (default 10 s).
	Heartbeat time.Duration
	// WriteTimeout cuts off a client that stops reading (default 30 s).
	WriteTimeout time.Duration
	// Wrap, when set, turns each event into the JSON value sent (used by
	// /global/event).
	Wrap func(ev core.Event) any
	// Translate, when set, turns each event into the frames sent in its
	// place (none, one or several: another dialect's events, see package
	// apiv2). A durable event's seq goes on the id line of its last
	// frame, so that a client cut off between two frames of one event
	// resumes before it, never past the frames it missed.
	Translate func(ev core.Event) []Frame
	// Filter, when set, keeps the events it returns true for (durable and
	// live); the others are not sent (an API key's stream leaves out other
	// keys' sessions).
	Filter func(ev core.Event) bool
}

// Frame is one SSE frame a Translate function makes: the event line
// (none when Event is empty) and the JSON of Data on the data line; or,
// with Comment set, a comment line that clients ignore (a heartbeat).
type Frame struct {
	Event   string
	Data    any
	Comment string
}

const readBatch = 512

// Bounds returns the first retained and the last assigned seq of the log.
type Bounds func(ctx context.Context) (first, last int64, err error)

// Stream writes the event stream to w until ctx ends or the client goes
// away. It first sends server.connected, then, when a cursor was given,
// replays every durable event after it (announcing pruned ranges with
// server.gap), then follows the log live, interleaving live-only events and
// heartbeats.
func (h *Hub) Stream(ctx context.Context, w http.ResponseWriter, bounds Bounds, opts StreamOptions) error {
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = 10 * time.Second
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 30 * time.Second
	}
	sub := h.Subscribe(opts.SessionID)
	defer sub.Close()

	first, last, err := bounds(ctx)
	if err != nil {
		return err
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("Connection", "keep-alive")
	hdr.Set("X-Accel-Buffering", "no")
	// The log's head when the stream opened: a client that starts without
	// a cursor still knows where to resume from after a drop, even when no
	// durable event reached it in between (the dashboard uses it).
	hdr.Set("X-Agentd-Seq", strconv.FormatInt(last, 10))
	w.WriteHeader(http.StatusOK)

	sw := &sseWriter{w: w, rc: http.NewResponseController(w), wrap: opts.Wrap, translate: opts.Translate, keep: opts.Filter,
		timeout: opts.WriteTimeout, sent: &h.delivered}
	sw.live(core.MustEvent("", core.EventServerConnected, struct{}{}))

	if opts.LiveWindow <= 0 {
		opts.LiveWindow = 300 * time.Millisecond
	}
	cursor := last
	if !opts.HasCursor {
		cursor = h.Recent(time.Now().Add(-opts.LiveWindow), last)
	}
	if opts.HasCursor {
		cursor = opts.After
		switch {
		case cursor < first-1:
			sw.live(core.MustEvent(opts.SessionID, core.EventServerGap, GapProps{After: cursor, First: first, Reason: "pruned"}))
			cursor = first - 1
		case cursor > last:
			sw.live(core.MustEvent(opts.SessionID, core.EventServerGap, GapProps{After: cursor, First: last + 1, Reason: "cursor_ahead"}))
			cursor = last
		}
	}
	if err := sw.flush(); err != nil {
		return err
	}

	hb := time.NewTicker(opts.Heartbeat)
	defer hb.Stop()
	// held is a live event taken from the queue that belongs after durable
	// events not yet sent; sendLive writes the queued live events published
	// before the log reached seq, in the order the hub saw them.
	var held *liveEvent
	sendLive := func(seq int64) {
		for {
			if held == nil {
				select {
				case le := <-sub.ch:
					held = &le
				default:
					return
				}
			}
			if held.after >= seq {
				return
			}
			sw.live(held.ev)
			held = nil
		}
	}
	for {
		evs, through, err := h.Read(ctx, cursor, opts.SessionID, readBatch)
		var gap *GapError
		if errors.As(err, &gap) {
			sw.live(core.MustEvent(opts.SessionID, core.EventServerGap, GapProps{After: gap.After, First: gap.First, Reason: "pruned"}))
			cursor = gap.First - 1
			continue
		}
		if err != nil {
			return err
		}
		for _, ev := range evs {
			sendLive(ev.Seq)
			sw.durable(ev)
		}
		cursor = through
		sendLive(cursor + 1)
		if err := sw.flush(); err != nil {
			return err
		}
		head, changed := h.Head()
		if head > cursor {
			continue
		}
		sub.Delivered(cursor)
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case le := <-sub.ch:
			// Sent on the next pass, with whatever else is queued, in one
			// write.
			held = &le
		case <-hb.C:
			sw.live(core.MustEvent("", core.EventServerHeartbeat, struct{}{}))
			if err := sw.flush(); err != nil {
				return err
			}
		}
	}
}

// GapProps is the payload of server.gap: events after After and before
// First are no longer in the log.
type GapProps struct {
	After  int64  `json:"after"`
	First  int64  `json:"first"`
	Reason string `json:"reason"`
}

type sseWriter struct {
	w         http.ResponseWriter
	rc        *http.ResponseController
	wrap      func(core.Event) any
	translate func(core.Event) []Frame
	keep      func(core.Event) bool
	timeout   time.Duration
	buf       bytes.Buffer
	// n counts the events in buf; sent, the hub's count of events its
	// streams sent, takes them once they are written.
	n    int64
	sent *atomic.Int64
}

func (s *sseWriter) durable(ev core.Event) {
	if s.keep != nil && !s.keep(ev) {
		return
	}
	if s.translate != nil {
		s.frames(s.translate(ev), strconv.FormatInt(ev.Seq, 10))
		return
	}
	s.buf.WriteString("id: ")
	s.buf.WriteString(strconv.FormatInt(ev.Seq, 10))
	s.buf.WriteByte('\n')
	s.data(ev)
}

func (s *sseWriter) live(ev core.Event) {
	if s.keep != nil && !s.keep(ev) {
		return
	}
	if ev.ID == "" {
		ev.ID = core.NewID(core.PrefixEvent, false)
	}
	if s.translate != nil {
		s.frames(s.translate(ev), "")
		return
	}
	s.data(ev)
}

// frames writes a translated event's frames, id (when set) on the last.
func (s *sseWriter) frames(fs []Frame, id string) {
	for i, f := range fs {
		if f.Comment != "" {
			s.buf.WriteString(": " + f.Comment + "\n\n")
			continue
		}
		if id != "" && i == len(fs)-1 {
			s.buf.WriteString("id: " + id + "\n")
		}
		if f.Event != "" {
			s.buf.WriteString("event: " + f.Event + "\n")
		}
		b, err := json.Marshal(f.Data)
		if err != nil {
			// As in data: a bug, surfaced rather than crashing the stream.
			b, _ = json.Marshal(map[string]string{"type": "server.error", "message": err.Error()})
		}
		s.buf.WriteString("data: ")
		s.buf.Write(b)
		s.buf.WriteString("\n\n")
		s.n++
	}
}

func (s *sseWriter) data(ev core.Event) {
	var v any = ev
	if s.wrap != nil {
		v = s.wrap(ev)
	}
	b, err := json.Marshal(v)
	if err != nil {
		// Properties are produced by this server as valid JSON; a failure
		// here is a bug, surfaced as an error event rather than a crash.
		b, _ = json.Marshal(core.MustEvent(ev.SessionID, core.EventSessionError, map[string]any{"error": core.NewError("UnknownError", err.Error())}))
	}
	s.buf.WriteString("data: ")
	s.buf.Write(b)
	s.buf.WriteString("\n\n")
	s.n++
}

func (s *sseWriter) flush() error {
	if s.buf.Len() == 0 {
		return nil
	}
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	if _, err := s.w.Write(s.buf.Bytes()); err != nil {
		return err
	}
	s.buf.Reset()
	if s.sent != nil {
		s.sent.Add(s.n)
	}
	s.n = 0
	return s.rc.Flush()
}
