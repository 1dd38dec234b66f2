package events

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/core"
)

// TestStreamKeepsLiveBeforeLaterCommits: a part's deltas published before
// the commit of its final text reach the stream before that commit, also
// when the stream wakes for the commit first. Sent after it, a client that
// appends deltas to the text it has showed the answer twice (agentd run
// printed "the answerthe answer").
func TestStreamKeepsLiveBeforeLaterCommits(t *testing.T) {
	t.Parallel()
	lr := &logReader{evs: mkEvents(1, 3)}
	h := NewHub(lr, 2, 16)
	h.Publish(lr.evs[:2])
	delta := func(s string) core.Event {
		return core.MustEvent("ses_1", core.EventPartDelta, core.DeltaProps{SessionID: "ses_1", PartID: "prt_1", Field: "text", Delta: s})
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The stream has subscribed and not yet read: a delta, the
		// commit after it, and a delta after the commit all wait for it,
		// as when the stream's goroutine is slower than the run.
		bounds := func(context.Context) (int64, int64, error) {
			h.PublishLive(delta("before"))
			h.Publish(lr.evs[2:3])
			h.PublishLive(delta("after"))
			return 1, 2, nil
		}
		_ = h.Stream(r.Context(), w, bounds, StreamOptions{After: 2, HasCursor: true})
	}))
	defer srv.Close()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got []string
	sc := bufio.NewScanner(resp.Body)
	for len(got) < 3 && sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev core.Event
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatal(err)
		}
		switch ev.Type {
		case core.EventPartDelta:
			var d core.DeltaProps
			json.Unmarshal(ev.Properties, &d)
			got = append(got, d.Delta)
		case "test":
			got = append(got, "commit")
		}
	}
	if want := "before commit after"; strings.Join(got, " ") != want {
		t.Errorf("stream order %q, want %q", strings.Join(got, " "), want)
	}
}
