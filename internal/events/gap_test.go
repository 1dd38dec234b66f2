package events

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// pruningReader is a log that retention prunes, through seq pruneTo, right
// after the first read a subscriber makes: the subscriber has fallen
// behind by then.
type pruningReader struct {
	store.Reader
	mu      sync.Mutex
	evs     []core.Event
	pruneTo int64
	reads   int
}

func (p *pruningReader) Events(_ context.Context, q store.EventQuery) ([]core.Event, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []core.Event
	for _, ev := range p.evs {
		if ev.Seq > q.After && (q.SessionID == "" || ev.SessionID == q.SessionID) && len(out) < q.Limit {
			out = append(out, ev)
		}
	}
	if p.reads++; p.reads == 1 {
		for len(p.evs) > 0 && p.evs[0].Seq <= p.pruneTo {
			p.evs = p.evs[1:]
		}
	}
	return out, nil
}

func (p *pruningReader) EventBounds(context.Context) (int64, int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.evs[0].Seq, p.evs[len(p.evs)-1].Seq, nil
}

// TestStreamAnnouncesGapPrunedMidStream: a subscriber replaying from the
// start of the log, which retention prunes while the subscriber is still
// behind, is told with server.gap which events it will never get, between
// the last event it got before them and the first after.
func TestStreamAnnouncesGapPrunedMidStream(t *testing.T) {
	t.Parallel()
	const last, pruneTo = 3000, 1999
	for _, sid := range []string{"", "ses_1"} {
		pr := &pruningReader{evs: mkEvents(1, last), pruneTo: pruneTo}
		// Nothing in memory: every read goes to the store.
		h := NewHub(pr, last, 16)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			bounds := func(context.Context) (int64, int64, error) { return 1, last, nil }
			_ = h.Stream(r.Context(), w, bounds, StreamOptions{After: 0, HasCursor: true, SessionID: sid})
		}))
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var seqs []int64
		var gaps []GapProps
		gapAt := -1
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var id int64 // the frame's id: line, which a durable event has
		for sc.Scan() {
			line := sc.Text()
			if v, ok := strings.CutPrefix(line, "id: "); ok {
				id, _ = strconv.ParseInt(v, 10, 64)
				continue
			}
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				continue
			}
			var ev core.Event
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatalf("frame %s: %v", data, err)
			}
			switch {
			case ev.Type == core.EventServerGap:
				var g GapProps
				json.Unmarshal(ev.Properties, &g)
				gaps, gapAt = append(gaps, g), len(seqs)
			case id > 0:
				seqs = append(seqs, id)
			}
			id = 0
			if len(seqs) > 0 && seqs[len(seqs)-1] >= last-2 {
				break
			}
		}
		cancel()
		resp.Body.Close()
		srv.Close()
		if len(seqs) == 0 || gapAt <= 0 || gapAt >= len(seqs) {
			t.Fatalf("session %q: %d events, server.gap %v before event %d", sid, len(seqs), gaps, gapAt)
		}
		before, after := seqs[gapAt-1], seqs[gapAt]
		if len(gaps) != 1 || gaps[0].Reason != "pruned" || gaps[0].After != before || gaps[0].First != pruneTo+1 || after <= pruneTo {
			t.Errorf("session %q: server.gap %+v between events %d and %d; want one, after %d, first %d", sid, gaps, before, after, before, pruneTo+1)
		}
		for i := 1; i < len(seqs); i++ {
			if seqs[i] <= seqs[i-1] {
				t.Fatalf("session %q: event %d after %d", sid, seqs[i], seqs[i-1])
			}
		}
	}
}
