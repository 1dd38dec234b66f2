package plugin

import (
	"encoding/json"
	"testing"

	"github.com/agentd/agentd/internal/core"
)

// TestEventQueueBounds: the event hook's queue keeps events in order,
// drops a live-only event past its bound and a committed one only past
// the larger one, counting each drop.
func TestEventQueueBounds(t *testing.T) {
	t.Parallel()
	q := newEventQueue()
	for i := range maxLiveQueued + 10 {
		q.push(true, core.Event{ID: "live", Seq: int64(i)})
	}
	if d := q.dropped.Load(); d != 10 {
		t.Fatalf("live events dropped: %d, want 10", d)
	}
	q.push(false, core.Event{ID: "committed", Seq: 1})
	if d := q.dropped.Load(); d != 10 {
		t.Fatalf("a committed event was dropped under the live bound: %d", d)
	}
	got := q.take(maxLiveQueued+1, nil)
	if len(got) != maxLiveQueued+1 || got[0].Seq != 0 || got[maxLiveQueued-1].Seq != maxLiveQueued-1 || got[maxLiveQueued].ID != "committed" {
		t.Fatalf("taken out of order: %d events, first %+v, last %+v", len(got), got[0], got[len(got)-1])
	}
	for range maxQueued + 5 {
		q.push(false, core.Event{ID: "committed"})
	}
	if d := q.dropped.Load(); d != 15 {
		t.Fatalf("dropped %d, want 15 (10 live, 5 committed past the bound)", d)
	}
}

// TestAppendEvent: an event's notification is one valid JSON line, its
// properties as they were (compacted when they held a newline).
func TestAppendEvent(t *testing.T) {
	t.Parallel()
	for _, props := range []string{`{"delta":"a\"b"}`, "{\n\"x\": 1}", ""} {
		line := appendEvent(nil, core.Event{ID: "evt_1", Type: core.EventPartDelta, Properties: json.RawMessage(props)})
		if line[len(line)-1] != '\n' || !json.Valid(line[:len(line)-1]) {
			t.Fatalf("not one JSON line: %q", line)
		}
		var m struct {
			Method string
			Params struct{ Event struct{ ID, Type string } }
		}
		if err := json.Unmarshal(line, &m); err != nil || m.Method != "event" || m.Params.Event.ID != "evt_1" {
			t.Fatalf("%q: %+v %v", line, m, err)
		}
	}
}
