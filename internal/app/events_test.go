package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/core"
)

// errStop ends a client stream on purpose.
var errStop = errors.New("stop reading")

// TestReplayAcrossDisconnects follows /event during a busy workload,
// dropping the connection at 100 random points and resuming with
// Last-Event-ID each time; it must see every durable event exactly once,
// in order.
func TestReplayAcrossDisconnects(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	ctx := t.Context()
	_, start, _ := n.app.Store.EventBounds(ctx)

	workCtx, stopWork := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			sid := n.session()
			for i := 0; workCtx.Err() == nil; i++ {
				text := "reply:hello there"
				if i%3 == 0 {
					text = `tool:echo:{"text":"x"}`
				}
				n.c.Send(workCtx, sid, client.Prompt{Text: text})
			}
		})
	}

	rng := rand.New(rand.NewPCG(1, 2))
	var seqs []int64
	cursor := start
	for range 100 {
		budget := 1 + rng.IntN(40)
		err := n.c.Events(ctx, "", cursor, true, func(ev client.Event) error {
			if ev.Seq == 0 {
				return nil
			}
			seqs = append(seqs, ev.Seq)
			cursor = ev.Seq
			budget--
			if budget == 0 {
				return errStop
			}
			return nil
		})
		if !errors.Is(err, errStop) {
			t.Fatalf("stream ended: %v", err)
		}
	}
	stopWork()
	wg.Wait()
	// Drain what is left, then compare with the log.
	_, last, _ := n.app.Store.EventBounds(ctx)
	if cursor < last {
		err := n.c.Events(ctx, "", cursor, true, func(ev client.Event) error {
			if ev.Seq == 0 {
				return nil
			}
			seqs = append(seqs, ev.Seq)
			if ev.Seq >= last {
				return errStop
			}
			return nil
		})
		if !errors.Is(err, errStop) {
			t.Fatal(err)
		}
	}
	for i, s := range seqs {
		if s != start+int64(i)+1 {
			t.Fatalf("event %d has seq %d, want %d: a gap or a duplicate", i, s, start+int64(i)+1)
		}
	}
	if int64(len(seqs)) != last-start {
		t.Errorf("received %d events, log has %d", len(seqs), last-start)
	}
}

// TestLiveStreamFraming checks opencode's framing on a live stream:
// server.connected first, id lines on durable events only, deltas live.
func TestLiveStreamFraming(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	sid := n.session()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", n.app.URL()+"/event", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("content type = %q", ct)
	}
	done := make(chan struct{})
	var evs []client.Event
	go func() {
		defer close(done)
		client.ReadSSE(resp.Body, func(ev client.Event) error {
			evs = append(evs, ev)
			if ev.Type == core.EventSessionIdle {
				return errStop
			}
			return nil
		})
	}()
	// The stream is live once server.connected has been read; send after a
	// round trip on the same server so the subscription surely exists.
	n.waitSubscribers(1)
	n.send(sid, "reply:one two three four")
	<-done
	if len(evs) == 0 || evs[0].Type != core.EventServerConnected || evs[0].Seq != 0 {
		t.Fatalf("first event = %+v, want server.connected without id", evs)
	}
	deltas, durable := 0, 0
	seen := map[string]bool{}
	for _, ev := range evs[1:] {
		var props struct {
			PartID string `json:"partID"`
			Part   struct {
				ID string `json:"id"`
			} `json:"part"`
		}
		json.Unmarshal(ev.Properties, &props)
		switch {
		case ev.Type == core.EventPartDelta:
			deltas++
			if ev.Seq != 0 {
				t.Errorf("delta carries id %d", ev.Seq)
			}
			// opencode's clients drop deltas of a part they have not seen.
			if !seen[props.PartID] {
				t.Errorf("a delta of part %s came before its first message.part.updated", props.PartID)
			}
		case ev.Seq == 0 && (ev.Type == core.EventPartUpdated || ev.Type == core.EventMessageUpdated):
			// A live announcement; its durable version follows.
			seen[props.Part.ID] = true
		default:
			durable++
			seen[props.Part.ID] = true
			if ev.Seq == 0 || ev.ID != core.DurableEventID(ev.Seq) {
				t.Errorf("durable %s: seq %d id %q", ev.Type, ev.Seq, ev.ID)
			}
		}
	}
	if deltas == 0 || durable == 0 {
		t.Errorf("deltas=%d durable=%d", deltas, durable)
	}
}

func (n *node) waitSubscribers(k int) {
	n.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for n.app.Hub.Subscribers() < k {
		if time.Now().After(deadline) {
			n.t.Fatal("subscriber never registered")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestGapAfterRetention(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	sid := n.session()
	for range 3 {
		n.send(sid, "reply:x")
	}
	_, last, _ := n.app.Store.EventBounds(t.Context())
	if _, err := n.app.Store.PruneEvents(t.Context(), 0, 5); err != nil {
		t.Fatal(err)
	}
	first, _, _ := n.app.Store.EventBounds(t.Context())
	var got []client.Event
	err := n.c.Events(t.Context(), "", 1, true, func(ev client.Event) error {
		got = append(got, ev)
		if ev.Seq == last {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) {
		t.Fatal(err)
	}
	if len(got) < 3 || got[1].Type != core.EventServerGap {
		t.Fatalf("events = %+v, want server.connected then server.gap", got)
	}
	var gap struct{ After, First int64 }
	json.Unmarshal(got[1].Properties, &gap)
	if gap.After != 1 || gap.First != first {
		t.Errorf("gap = %+v, want after 1 first %d", gap, first)
	}
	if got[2].Seq != first {
		t.Errorf("after the gap came seq %d, want %d", got[2].Seq, first)
	}
	if len(got)-2 != 5 {
		t.Errorf("replayed %d events, want the 5 retained", len(got)-2)
	}
}

func TestSessionEventStreamAndGlobal(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	a, b := n.session(), n.session()
	n.send(a, "reply:a")
	n.send(b, "reply:b")
	var got []client.Event
	_, last, _ := n.app.Store.EventBounds(t.Context())
	var lastA int64
	for _, ev := range n.allEvents() {
		if ev.SessionID == a {
			lastA = ev.Seq
		}
	}
	err := n.c.Events(t.Context(), a, 0, true, func(ev client.Event) error {
		if ev.Seq == 0 {
			return nil
		}
		got = append(got, ev)
		if ev.Seq == lastA {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) {
		t.Fatal(err)
	}
	for _, ev := range got {
		if !strings.Contains(string(ev.Properties), a) || strings.Contains(string(ev.Properties), b) {
			t.Errorf("session stream of %s carried %s %s", a, ev.Type, ev.Properties)
		}
	}
	// /global/event wraps each event with its directory.
	req, _ := http.NewRequestWithContext(t.Context(), "GET", n.app.URL()+"/global/event?after="+strconv.FormatInt(last-1, 10), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		var w struct {
			Directory string          `json:"directory"`
			Payload   json.RawMessage `json:"payload"`
		}
		if err := json.Unmarshal([]byte(line[6:]), &w); err != nil {
			t.Fatal(err)
		}
		var p client.Event
		json.Unmarshal(w.Payload, &p)
		if w.Directory == "" || p.Type == "" {
			t.Fatalf("global event not wrapped: %s", line)
		}
		if p.Type != core.EventServerConnected {
			if p.ID != core.DurableEventID(last) {
				t.Errorf("replayed global event id %q, want %d", p.ID, last)
			}
			break
		}
	}
}

// TestLiveStreamStartsJustBefore pins the live window: a client that
// subscribes without a cursor just after its prompt reached the server
// (its two requests crossed) still sees that prompt's whole run, while
// events older than the window are not replayed. The crossing is what the
// window covers, not the run: the prompt is sent without waiting for its
// answer (a blocking one put the whole run, a second under load, into the
// window). The window is the test's, wider than the default 300 ms: under
// a loaded machine's -race even the crossing took longer.
func TestLiveStreamStartsJustBefore(t *testing.T) {
	t.Parallel()
	const window = 3 * time.Second
	n := startNode(t, func(c *app.Config) { c.LiveWindow = window })
	old := n.session()
	n.send(old, "reply:long ago")
	oldEvents := n.allEvents()
	time.Sleep(window + 100*time.Millisecond) // let the first run fall out of the window
	sid := n.session()
	before := n.allEvents()
	if err := n.c.SendAsync(t.Context(), sid, client.Prompt{Text: "reply:just now"}); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	var idle int64
	err := n.c.Events(t.Context(), "", 0, false, func(ev client.Event) error {
		if ev.Seq != 0 && ev.Seq <= oldEvents[len(oldEvents)-1].Seq {
			t.Errorf("event %d (%s) from before the window was replayed", ev.Seq, ev.Type)
		}
		if ev.Seq != 0 {
			seen[ev.Seq] = true
		}
		if ev.Type == core.EventSessionIdle {
			idle = ev.Seq
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) {
		t.Fatalf("stream: %v", err)
	}
	for _, ev := range n.allEvents() {
		if ev.Seq > before[len(before)-1].Seq && ev.Seq <= idle && ev.SessionID == sid && !seen[ev.Seq] {
			t.Errorf("event %d (%s) of the prompt's run was not on the stream", ev.Seq, ev.Type)
		}
	}
}
