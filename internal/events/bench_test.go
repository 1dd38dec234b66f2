package events

import (
	"net/http/httptest"
	"testing"

	"github.com/agentd/agentd/internal/core"
)

// BenchmarkHubRead reads recent events from the ring, the path of every
// caught-up SSE subscriber.
func BenchmarkHubRead(b *testing.B) {
	h := NewHub(&logReader{}, 0, DefaultRingSize)
	h.Publish(mkEvents(1, 10000))
	b.ReportAllocs()
	for b.Loop() {
		evs, _, _ := h.Read(b.Context(), 9000, "", 512)
		if len(evs) != 512 {
			b.Fatal(len(evs))
		}
	}
}

// BenchmarkSSEEncode frames durable events for the wire.
func BenchmarkSSEEncode(b *testing.B) {
	evs := mkEvents(1, 100)
	rec := httptest.NewRecorder()
	w := &sseWriter{w: rec}
	b.ReportAllocs()
	for b.Loop() {
		for _, ev := range evs {
			w.durable(ev)
		}
		w.buf.Reset()
	}
	b.ReportMetric(float64(len(evs)*b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkPublish measures the commit hook's cost per event.
func BenchmarkPublish(b *testing.B) {
	h := NewHub(&logReader{}, 0, DefaultRingSize)
	seq := int64(0)
	ev := core.MustEvent("ses_1", "test", 1)
	b.ReportAllocs()
	for b.Loop() {
		seq++
		ev.Seq = seq
		h.Publish([]core.Event{ev})
	}
}
