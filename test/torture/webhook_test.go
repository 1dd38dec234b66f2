package torture

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store/postgres/pgtest"
	"github.com/agentd/agentd/internal/webhook"
)

const tortureSecret = "torture-webhook-secret-0123456789"

// hookSink receives webhooks on 127.0.0.1: it fails each delivery fail
// times (503) before it accepts it, checks every signature, and while
// its gate is shut holds requests until the gate opens or their sender
// goes away (a killed node).
type hookSink struct {
	t        *testing.T
	srv      *httptest.Server
	mu       sync.Mutex
	fail     int
	tries    map[string]int
	accepted map[string]int // accepted requests per delivery id
	order    map[string][]webhook.Envelope
	bad      []string
	held     int
	gate     chan struct{}
}

func newHookSink(t *testing.T, fail int) *hookSink {
	h := &hookSink{t: t, fail: fail, tries: map[string]int{}, accepted: map[string]int{}, order: map[string][]webhook.Envelope{}}
	h.gate = make(chan struct{})
	close(h.gate)
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookSink) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	gate := h.gate
	h.held++
	h.mu.Unlock()
	select {
	case <-gate:
	case <-r.Context().Done():
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held--
	if r.Context().Err() != nil {
		return // its sender went away: nothing was accepted
	}
	id := r.Header.Get(webhook.HeaderDelivery)
	var env webhook.Envelope
	if err := webhook.Verify(tortureSecret, r.Header.Get(webhook.HeaderSignature), body, time.Now(), time.Minute); err != nil ||
		json.Unmarshal(body, &env) != nil || env.ID != id {
		h.bad = append(h.bad, id)
	}
	h.tries[id]++
	if h.tries[id] <= h.fail {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if h.accepted[id] == 0 {
		h.order[r.URL.Path] = append(h.order[r.URL.Path], env)
	}
	h.accepted[id]++
}

func (h *hookSink) shut() {
	h.mu.Lock()
	h.gate = make(chan struct{})
	h.mu.Unlock()
}

func (h *hookSink) open() {
	h.mu.Lock()
	close(h.gate)
	h.mu.Unlock()
}

// runs returns the run ids of the deliveries accepted at path, in the
// order accepted, once n have been.
func (h *hookSink) runs(path string, n int) []string {
	h.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		h.mu.Lock()
		got := append([]webhook.Envelope(nil), h.order[path]...)
		h.mu.Unlock()
		if len(got) >= n {
			var ids []string
			for _, env := range got {
				var d webhook.RunEnded
				json.Unmarshal(env.Data, &d)
				ids = append(ids, d.RunID)
			}
			return ids
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s: %d webhooks accepted, want %d", path, len(got), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func postJSON(t *testing.T, url string, body any) int {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		t.Logf("POST %s: %d %s", url, resp.StatusCode, msg)
	}
	return resp.StatusCode
}

func webhookConfig(extra string) string {
	return `,"agentd":{"webhooks":{"secret":"{env:AGENTD_TEST_WEBHOOK_SECRET}","allow":["127.0.0.1"]` + extra + `}}`
}

// endedRuns are a session's runs in the order they ended.
func endedRuns(t *testing.T, c *client.Client, sid string) []string {
	t.Helper()
	runs, err := c.Runs(t.Context(), sid)
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].Time.Ended < runs[j].Time.Ended })
	var ids []string
	for _, r := range runs {
		if !core.TerminalState(r.State) {
			t.Fatalf("run %s has not ended: %s", r.ID, r.State)
		}
		ids = append(ids, r.ID)
	}
	return ids
}

// TestWebhooksSurviveKill: a receiver that fails every delivery twice
// gets every run end once (deduplicated by delivery id), signed, and in
// the order the runs ended — through a subscription and through each
// prompt's callbackUrl — although agentd is killed (SIGKILL) while
// deliveries wait for their retry and again while a run streams.
func TestWebhooksSurviveKill(t *testing.T) {
	t.Setenv("AGENTD_TEST_WEBHOOK_SECRET", tortureSecret)
	sink := newHookSink(t, 2)
	srv, c, dbPath := crashNodeWith(t, 50*time.Millisecond, `{}`, webhookConfig(""))
	s, err := c.CreateSession(t.Context(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	if code := postJSON(t, srv.url+"/webhook", map[string]any{"url": sink.srv.URL + "/all"}); code != 200 {
		t.Fatalf("subscribe: %d", code)
	}
	for i, text := range []string{"reply:one", "reply:two", "sleep:40\nreply:three", "reply:four", "reply:five"} {
		body := map[string]any{"parts": []map[string]string{{"type": "text", "text": text}}, "callbackUrl": sink.srv.URL + "/cb"}
		if code := postJSON(t, srv.url+"/session/"+s.ID+"/prompt_async", body); code != 204 {
			t.Fatalf("prompt %d: %d", i, code)
		}
		if i == 2 {
			waitStatus(t, c, s.ID, func(st core.SessionStatus) bool { return st.Type == core.StatusBusy })
			srv.kill()
			srv.start()
		}
		if _, err := c.Wait(t.Context(), s.ID, "", time.Minute); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			// Both run ends so far wait for their retries.
			srv.kill()
			srv.start()
		}
	}
	want := endedRuns(t, c, s.ID)
	for _, path := range []string{"/all", "/cb"} {
		if got := sink.runs(path, len(want)); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: run ends accepted in the order\n%v, want\n%v", path, got, want)
		}
	}
	sink.mu.Lock()
	if len(sink.bad) > 0 || len(sink.accepted) != 2*len(want) {
		t.Errorf("%d deliveries accepted (want %d), badly signed: %v", len(sink.accepted), 2*len(want), sink.bad)
	}
	sink.mu.Unlock()
	srv.stop()
	checkStore(t, dbPath)
}

// TestWebhooksClusterOnce: three nodes on PostgreSQL relay one event log
// and share its deliveries: every run end is delivered by exactly one
// node; a node killed while it sends lets another node take its
// deliveries over when their leases expire, and each is still accepted
// once.
func TestWebhooksClusterOnce(t *testing.T) {
	t.Setenv("AGENTD_TEST_WEBHOOK_SECRET", tortureSecret)
	url := pgtest.Schema(t)
	sink := newHookSink(t, 0)
	cl := startClusterWith(t, 3, url, webhookConfig(`,"timeout":"3s"`))
	defer cl.noSpuriousFencing(t)
	if code := postJSON(t, cl.srvs[0].url+"/webhook", map[string]any{"url": sink.srv.URL + "/all"}); code != 200 {
		t.Fatalf("subscribe: %d", code)
	}
	var sessions []string
	prompt := func(i int) {
		c := cl.clients[i%3]
		s, err := c.CreateSession(t.Context(), "", "")
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, s.ID)
		if err := cl.clients[(i+1)%3].SendAsync(t.Context(), s.ID, client.Prompt{Text: fmt.Sprintf("reply:%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 9 {
		prompt(i)
	}
	sink.runs("/all", 9)
	waitDelivered(t, cl.srvs[2].url, 9)
	// A node dies while it sends: its requests hang at the receiver.
	sink.shut()
	for i := 9; i < 12; i++ {
		prompt(i)
	}
	victim := waitSender(t, sink, cl.srvs[0].url)
	cl.srvs[victim].kill()
	sink.open()
	alive := cl.srvs[(victim+1)%3].url
	sink.runs("/all", 12)
	waitDelivered(t, alive, 12)
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.accepted) != 12 || len(sink.bad) > 0 {
		t.Errorf("%d deliveries accepted, want 12; badly signed %v", len(sink.accepted), sink.bad)
	}
	for id, n := range sink.accepted {
		if n != 1 {
			t.Errorf("delivery %s accepted %d times", id, n)
		}
	}
}

// waitDelivered waits until the node lists n deliveries, all delivered.
func waitDelivered(t *testing.T, url string, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var ds []webhook.DeliveryJSON
		if resp, err := http.Get(url + "/webhook/delivery"); err == nil {
			json.NewDecoder(resp.Body).Decode(&ds)
			resp.Body.Close()
		}
		done := len(ds) == n
		for _, d := range ds {
			done = done && d.State == "delivered"
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("deliveries never all delivered: %+v", ds)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitSender waits until a request is held at the sink and returns the
// index of the node sending a pending delivery.
func waitSender(t *testing.T, sink *hookSink, url string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		sink.mu.Lock()
		held := sink.held
		sink.mu.Unlock()
		var ds []webhook.DeliveryJSON
		if resp, err := http.Get(url + "/webhook/delivery?state=pending"); err == nil {
			json.NewDecoder(resp.Body).Decode(&ds)
			resp.Body.Close()
		}
		for _, d := range ds {
			if held > 0 && strings.HasPrefix(d.Node, "node") {
				var i int
				fmt.Sscanf(d.Node, "node%d", &i)
				return i
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no delivery is being sent: %+v", ds)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
