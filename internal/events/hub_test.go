package events

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// logReader serves events from a slice, standing in for the store's event
// query (the hub only reads through store.Reader.Events).
type logReader struct {
	store.Reader
	evs   []core.Event
	reads int
}

func (l *logReader) Events(_ context.Context, q store.EventQuery) ([]core.Event, error) {
	l.reads++
	var out []core.Event
	for _, ev := range l.evs {
		if ev.Seq > q.After && (q.SessionID == "" || ev.SessionID == q.SessionID) && len(out) < q.Limit {
			out = append(out, ev)
		}
	}
	return out, nil
}

func mkEvents(from, to int64) []core.Event {
	var out []core.Event
	for s := from; s <= to; s++ {
		ev := core.MustEvent(fmt.Sprintf("ses_%d", s%3), "test", s)
		ev.Seq, ev.ID = s, core.DurableEventID(s)
		out = append(out, ev)
	}
	return out
}

func TestHubReadsRingThenStore(t *testing.T) {
	t.Parallel()
	all := mkEvents(1, 100)
	lr := &logReader{evs: all}
	h := NewHub(lr, 0, 16)
	for i := 0; i < len(all); i += 7 {
		h.Publish(all[i:min(i+7, len(all))])
	}
	head, _ := h.Head()
	if head != 100 {
		t.Fatalf("head = %d", head)
	}
	// Recent positions come from memory.
	evs, through, err := h.Read(t.Context(), 95, "", 100)
	if err != nil || len(evs) != 5 || through != 100 || lr.reads != 0 {
		t.Fatalf("recent read: %d events through %d, %d store reads", len(evs), through, lr.reads)
	}
	// Old positions fall back to the store, in order, without holes.
	var got []int64
	for cursor := int64(0); cursor < 100; {
		evs, through, err = h.Read(t.Context(), cursor, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			got = append(got, ev.Seq)
		}
		cursor = through
	}
	for i, s := range got {
		if s != int64(i+1) {
			t.Fatalf("read order broken at %d: %d", i, s)
		}
	}
	if lr.reads == 0 {
		t.Error("old positions were not read from the store")
	}
	// Session filter skips other sessions but still advances the cursor.
	evs, through, _ = h.Read(t.Context(), 90, "ses_1", 100)
	for _, ev := range evs {
		if ev.SessionID != "ses_1" {
			t.Errorf("filter leaked %s", ev.SessionID)
		}
	}
	if through != 100 {
		t.Errorf("filtered read through %d, want 100", through)
	}
}

func TestHubHoleResetsRing(t *testing.T) {
	t.Parallel()
	lr := &logReader{evs: mkEvents(1, 20)}
	h := NewHub(lr, 0, 64)
	h.Publish(mkEvents(1, 5))
	// Another node wrote 6..9; this node only hears of 10.
	h.Publish(mkEvents(10, 10))
	evs, through, _ := h.Read(t.Context(), 5, "", 100)
	if len(evs) == 0 || evs[0].Seq != 6 || through < 10 {
		t.Fatalf("read after a hole = %d events through %d", len(evs), through)
	}
	for i, ev := range evs {
		if ev.Seq != int64(6+i) {
			t.Fatalf("hole in the read at %d: %d", i, ev.Seq)
		}
	}
}

func TestLiveDropsWhenFull(t *testing.T) {
	t.Parallel()
	h := NewHub(&logReader{}, 0, 0)
	s := h.Subscribe("")
	defer s.Close()
	for range liveQueue + 10 {
		h.PublishLive(core.MustEvent("ses_1", core.EventPartDelta, map[string]string{}))
	}
	if h.Dropped() != 10 {
		t.Errorf("dropped = %d, want 10", h.Dropped())
	}
	s.Close()
	s.Close()
	if h.Subscribers() != 0 {
		t.Error("close did not unsubscribe")
	}
}

func FuzzParseCursor(f *testing.F) {
	for _, s := range []string{"", "0", "42", "-1", "1e3", "abc", " 7 ", "99999999999999999999", "\x00"} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, v string, header bool) {
		r := httptest.NewRequest("GET", "/event", nil)
		if header {
			r.Header.Set("Last-Event-ID", v)
		} else {
			q := r.URL.Query()
			q.Set("after", v)
			r.URL.RawQuery = q.Encode()
		}
		n, ok, err := ParseCursor(r)
		if err != nil && (ok || n != 0) {
			t.Fatalf("error with a cursor: %d %v %v", n, ok, err)
		}
		if ok && n < 0 {
			t.Fatalf("negative cursor %d accepted", n)
		}
	})
}

// TestHubReadBoundedByBytes pins that one read from memory holds about
// MaxBatchBytes of events however many were asked for, and that reading
// on from the returned cursor loses none.
func TestHubReadBoundedByBytes(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 300<<10)
	var all []core.Event
	for s := int64(1); s <= 20; s++ {
		ev := core.MustEvent("ses_big", "test", big)
		ev.Seq, ev.ID = s, core.DurableEventID(s)
		all = append(all, ev)
	}
	h := NewHub(&logReader{evs: all}, 0, 64)
	h.Publish(all)
	var got []int64
	for cursor := int64(0); cursor < 20; {
		evs, through, err := h.Read(t.Context(), cursor, "", 1000)
		if err != nil {
			t.Fatal(err)
		}
		if n := bytesOf(evs); n > MaxBatchBytes+len(big)+64 {
			t.Fatalf("one read held %d bytes", n)
		}
		for _, ev := range evs {
			got = append(got, ev.Seq)
		}
		if through <= cursor {
			t.Fatalf("cursor stuck at %d", cursor)
		}
		cursor = through
	}
	if len(got) != 20 {
		t.Fatalf("read %d of 20 events", len(got))
	}
}

// prunedReader is a log whose oldest events retention has deleted.
type prunedReader struct{ logReader }

func (p *prunedReader) EventBounds(context.Context) (int64, int64, error) {
	return p.evs[0].Seq, p.evs[len(p.evs)-1].Seq, nil
}

// TestHubReadReportsPrunedHole pins that a reader whose cursor retention
// overtook between two reads is told (GapError) instead of silently
// jumping over the pruned events.
func TestHubReadReportsPrunedHole(t *testing.T) {
	t.Parallel()
	pr := &prunedReader{logReader{evs: mkEvents(21, 30)}}
	h := NewHub(pr, 30, 16)
	for _, sid := range []string{"", "ses_1"} {
		_, _, err := h.Read(t.Context(), 5, sid, 100)
		var gap *GapError
		if !errors.As(err, &gap) || gap.After != 5 || gap.First != 21 {
			t.Fatalf("session %q: read past a pruned range: %v", sid, err)
		}
	}
	evs, through, err := h.Read(t.Context(), 20, "", 100)
	if err != nil || len(evs) != 10 || through != 30 {
		t.Fatalf("read from the retained start: %d events through %d, %v", len(evs), through, err)
	}
}

// A waiter on one session wakes when that session's state changes, and
// not for streamed text or for other sessions: with 1,000 blocked prompts,
// waking all of them on every commit cost a sixth of the server's CPU.
func TestWatchWakesOnlyForStateOfItsSession(t *testing.T) {
	h := NewHub(&logReader{}, 0, 0)
	seq := int64(0)
	publish := func(sid, typ string) {
		seq++
		h.Publish([]core.Event{{Seq: seq, SessionID: sid, Type: typ}})
	}
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	w := h.Watch("ses_a")
	if h.Watch("ses_a") != w {
		t.Fatal("two waiters on one session should share a channel")
	}
	publish("ses_b", core.EventRunUpdated)
	publish("ses_a", core.EventPartUpdated)
	publish("ses_a", core.EventMessageUpdated)
	if closed(w) {
		t.Fatal("woken by another session's run or by its own text")
	}
	publish("ses_a", core.EventRunUpdated)
	if !closed(w) {
		t.Fatal("not woken by its run's change")
	}
	for _, typ := range []string{core.EventPermissionAsked, core.EventPermissionReplied, core.EventSessionDeleted} {
		w := h.Watch("ses_a")
		publish("ses_a", typ)
		if !closed(w) {
			t.Fatalf("not woken by %s", typ)
		}
	}
	if len(h.watch) != 0 {
		t.Fatalf("%d watches left after they fired", len(h.watch))
	}
}

// TestRingBoundedByBytes: events as large as what clients send (a 9 MB
// title, sixty times) cost the ring at most RingBytes; readers behind it
// get every event from the store, in order.
func TestRingBoundedByBytes(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 9<<20)
	var all []core.Event
	for s := int64(1); s <= 60; s++ {
		ev := core.MustEvent("ses_a", core.EventSessionUpdated, map[string]string{"title": big})
		ev.Seq, ev.ID = s, core.DurableEventID(s)
		all = append(all, ev)
	}
	lr := &logReader{evs: all}
	h := NewHub(lr, 0, 0)
	for i := range all {
		h.Publish(all[i : i+1])
		h.mu.RLock()
		if h.bytes > RingBytes+eventBytes(all[i]) {
			t.Fatalf("ring holds %d bytes after %d events", h.bytes, i+1)
		}
		h.mu.RUnlock()
	}
	var got []int64
	for cursor := int64(0); cursor < 60; {
		evs, through, err := h.Read(t.Context(), cursor, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			got = append(got, ev.Seq)
		}
		cursor = through
	}
	for i, s := range got {
		if s != int64(i+1) {
			t.Fatalf("read order broken at %d: %d", i, s)
		}
	}
	if len(got) != 60 || lr.reads == 0 {
		t.Errorf("read %d events, %d from the store", len(got), lr.reads)
	}
}

// TestRecentStopsAtAFork: a stream opened without a cursor starts a
// moment back in the ring, but never before the end of a fork: the
// fork's copies of earlier messages are history, not new output; events
// after the fork are still in the window.
func TestRecentStopsAtAFork(t *testing.T) {
	t.Parallel()
	h := NewHub(&logReader{}, 0, 64)
	now := time.Now().UnixMilli()
	var evs []core.Event
	for i, typ := range []string{core.EventSessionCreated, core.EventMessageUpdated, core.EventPartUpdated,
		core.EventSessionForked, core.EventMessageUpdated, core.EventSessionStatus} {
		ev := core.MustEvent("ses_f", typ, struct{}{})
		ev.Seq, ev.ID, ev.Time = int64(i+1), core.DurableEventID(int64(i+1)), now
		evs = append(evs, ev)
	}
	h.Publish(evs[:4])
	if c := h.Recent(time.UnixMilli(now-300), 4); c != 4 {
		t.Errorf("right after a fork the window starts at %d, want 4 (after session.forked)", c)
	}
	h.Publish(evs[4:])
	if c := h.Recent(time.UnixMilli(now-300), 6); c != 4 {
		t.Errorf("after a fork and a prompt the window starts at %d, want 4", c)
	}
	// Without a fork in it, the window reaches back as far as its time.
	h2 := NewHub(&logReader{}, 0, 64)
	h2.Publish(append([]core.Event{}, evs[:3]...))
	if c := h2.Recent(time.UnixMilli(now-300), 3); c != 0 {
		t.Errorf("without a fork the window starts at %d, want 0", c)
	}
}
