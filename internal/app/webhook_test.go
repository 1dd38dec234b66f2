package app_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/webhook"
)

const hookSecret = "app-test-secret-0123456789"

// hookReceiver accepts webhooks on 127.0.0.1 after failing each delivery
// fail times (503), and checks each request's signature.
type hookReceiver struct {
	t     *testing.T
	srv   *httptest.Server
	mu    sync.Mutex
	fail  int
	got   map[string]webhook.Envelope // accepted, by delivery id
	paths map[string]string           // the path each was accepted on, by delivery id
	tries map[string]int
	order []string
	bad   []string
}

func newHookReceiver(t *testing.T, fail int) *hookReceiver {
	h := &hookReceiver{t: t, fail: fail, got: map[string]webhook.Envelope{}, paths: map[string]string{}, tries: map[string]int{}}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var env webhook.Envelope
		json.Unmarshal(body, &env)
		id := r.Header.Get(webhook.HeaderDelivery)
		h.mu.Lock()
		defer h.mu.Unlock()
		if err := webhook.Verify(hookSecret, r.Header.Get(webhook.HeaderSignature), body, time.Now(), time.Minute); err != nil || env.ID != id {
			h.bad = append(h.bad, id+": "+r.URL.Path)
		}
		h.tries[id]++
		if h.tries[id] <= h.fail {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if _, dup := h.got[id]; !dup {
			h.got[id] = env
			h.paths[id] = r.URL.Path
			h.order = append(h.order, id)
		}
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// wait returns the first n accepted deliveries, in the order accepted.
func (h *hookReceiver) wait(n int) []webhook.Envelope {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		h.mu.Lock()
		if len(h.order) >= n {
			var out []webhook.Envelope
			for _, id := range h.order {
				out = append(out, h.got[id])
			}
			bad := h.bad
			h.mu.Unlock()
			if len(bad) > 0 {
				h.t.Errorf("badly signed requests: %v", bad)
			}
			return out
		}
		h.mu.Unlock()
		if time.Now().After(deadline) {
			h.t.Fatalf("receiver accepted %d webhooks, want %d", len(h.order), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func withWebhooks(c *app.Config) {
	c.Webhooks = webhook.Config{Secret: hookSecret, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
		Backoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}
}

// call sends a JSON request to the node and decodes the answer into out
// (when set); it returns the status.
func (n *node) call(method, path string, body any, out any) int {
	n.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequestWithContext(n.t.Context(), method, n.app.URL()+path, rd)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		n.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			n.t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
	if resp.StatusCode >= 300 {
		n.t.Logf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	return resp.StatusCode
}

func runEnded(t *testing.T, env webhook.Envelope) webhook.RunEnded {
	t.Helper()
	var d webhook.RunEnded
	if env.Type != webhook.EventRunEnded || json.Unmarshal(env.Data, &d) != nil {
		t.Fatalf("not a run.ended: %+v", env)
	}
	return d
}

// TestCallbackURL: a prompt's callbackUrl — on v1's blocking and async
// routes and on v2's prompt — gets the end of the run that answered it,
// once, signed, with the answer, although the receiver fails twice first.
// The three URLs differ, so their deliveries have no order among them
// (retries due together go out side by side): each is found by its path.
func TestCallbackURL(t *testing.T) {
	t.Parallel()
	rcv := newHookReceiver(t, 2)
	n := startNode(t, withWebhooks)
	sid := n.session()
	text := func(s string) []map[string]string { return []map[string]string{{"type": "text", "text": s}} }
	var m struct {
		Info core.Message `json:"info"`
	}
	if st := n.call("POST", "/session/"+sid+"/message", map[string]any{"parts": text("reply:one"), "callbackUrl": rcv.srv.URL + "/v1"}, &m); st != 200 {
		t.Fatalf("blocking prompt: %d", st)
	}
	if st := n.call("POST", "/session/"+sid+"/prompt_async", map[string]any{"parts": text("reply:two"), "callbackUrl": rcv.srv.URL + "/async"}, nil); st != 204 {
		t.Fatalf("async prompt: %d", st)
	}
	n.waitIdle(sid)
	if st := n.call("POST", "/api/session/"+sid+"/prompt", map[string]any{"prompt": map[string]string{"text": "reply:three"},
		"callbackUrl": rcv.srv.URL + "/v2"}, nil); st != 200 {
		t.Fatalf("v2 prompt: %d", st)
	}
	n.waitIdle(sid)
	rcv.wait(3)
	byPath := map[string]webhook.Envelope{}
	rcv.mu.Lock()
	for id, env := range rcv.got {
		byPath[rcv.paths[id]] = env
	}
	rcv.mu.Unlock()
	runs, err := n.c.Runs(t.Context(), sid)
	if err != nil || len(runs) != 3 || len(byPath) != 3 {
		t.Fatalf("runs %+v %v; callbacks on %d paths", runs, err, len(byPath))
	}
	for i, want := range []string{"one", "two", "three"} {
		path := []string{"/v1", "/async", "/v2"}[i]
		d := runEnded(t, byPath[path])
		if d.RunID != runs[2-i].ID || d.Outcome != core.RunSucceeded || d.Response == nil || d.Response.Text != want || byPath[path].SessionID != sid {
			t.Errorf("callback on %s: %+v", path, d)
		}
	}
	if runEnded(t, byPath["/v1"]).Run.UserMessageID != m.Info.ParentID {
		t.Errorf("the blocking prompt's callback is not its run's")
	}
	list := n.waitDeliveries(allDelivered(3))
	for _, d := range list {
		if d.State != "delivered" || d.Attempts != 3 || d.WebhookID != "" || d.Type != webhook.EventRunEnded {
			t.Errorf("delivery %+v", d)
		}
	}
	for _, bad := range []map[string]any{
		{"parts": text("reply:x"), "callbackUrl": "http://10.0.0.1/hook"},
		{"parts": text("reply:x"), "callbackUrl": "file:///etc/passwd"},
		{"parts": text("reply:x"), "callbackUrl": rcv.srv.URL, "noReply": true},
	} {
		if st := n.call("POST", "/session/"+sid+"/prompt_async", bad, nil); st != 400 {
			t.Errorf("%v: %d, want 400", bad, st)
		}
	}
	if st := n.call("POST", "/session/ses_missing/prompt_async", map[string]any{"parts": text("x"), "callbackUrl": rcv.srv.URL}, nil); st != 404 {
		t.Errorf("a callback in a missing session: %d", st)
	}
}

// TestWebhookSubscriptions: subscriptions are made, listed, read and
// removed through /webhook; a server-wide one gets every session's run
// ends, a session's one only its own asks; bad input is refused; the
// deliveries and the metrics show what was sent.
func TestWebhookSubscriptions(t *testing.T) {
	t.Parallel()
	all, asks := newHookReceiver(t, 0), newHookReceiver(t, 0)
	n := startNode(t, withWebhooks, func(c *app.Config) {
		c.Engine.Permission = append(c.Engine.Permission, core.Rule{Permission: "bash", Pattern: "echo asked*", Action: core.ActionAsk})
	})
	a, b := n.session(), n.session()
	var sub, mine webhook.Subscription
	if st := n.call("POST", "/webhook", map[string]any{"url": all.srv.URL, "events": []string{"run.ended"}}, &sub); st != 200 || sub.ID == "" {
		t.Fatalf("subscribe: %d %+v", st, sub)
	}
	if st := n.call("POST", "/webhook", map[string]any{"url": asks.srv.URL, "sessionID": b, "events": []string{"ask.waiting"}}, &mine); st != 200 {
		t.Fatalf("subscribe: %d", st)
	}
	for body, want := range map[string]int{
		`{"url":"http://192.168.1.1/"}`: 400, `{"url":"x"}`: 400, `{"url":"https://example.com","events":["run.started"]}`: 400,
		`{"url":"https://example.com","sessionID":"ses_missing"}`: 404,
	} {
		var v any
		json.Unmarshal([]byte(body), &v)
		if st := n.call("POST", "/webhook", v, nil); st != want {
			t.Errorf("POST /webhook %s: %d, want %d", body, st, want)
		}
	}
	n.send(a, "reply:in a")
	go n.c.Send(t.Context(), b, client.Prompt{Text: `tool:bash:{"command":"echo asked"}` + "\nreply:in b"})
	got := asks.wait(1)
	var ask webhook.AskWaiting
	json.Unmarshal(got[0].Data, &ask)
	var req core.PermissionRequest
	json.Unmarshal(ask.Request, &req)
	if ask.Kind != "permission" || req.Permission != "bash" || got[0].SessionID != b {
		t.Errorf("ask.waiting %s", got[0].Data)
	}
	if err := n.c.ReplyPermission(t.Context(), req.ID, "once", ""); err != nil {
		t.Fatal(err)
	}
	n.waitIdle(b)
	// a's run ended first, but the two sessions' deliveries have no
	// order between them: each is found by its session.
	ends := all.wait(2)
	if ends[0].SessionID != a {
		ends[0], ends[1] = ends[1], ends[0]
	}
	if x, y := runEnded(t, ends[0]).Response, runEnded(t, ends[1]).Response; ends[0].SessionID != a || ends[1].SessionID != b ||
		x == nil || y == nil || x.Text != "in a" || !strings.HasPrefix(y.Text, "in b") {
		t.Errorf("run ends' answers %+v and %+v", x, y)
	}
	var list []webhook.Subscription
	if n.call("GET", "/webhook", nil, &list); len(list) != 2 || list[0].ID != sub.ID {
		t.Errorf("subscriptions %+v", list)
	}
	if n.call("GET", "/webhook?sessionID="+b, nil, &list); len(list) != 1 || list[0].ID != mine.ID {
		t.Errorf("b's subscriptions %+v", list)
	}
	if st := n.call("DELETE", "/webhook/"+sub.ID, nil, nil); st != 200 || n.call("GET", "/webhook/"+sub.ID, nil, nil) != 404 {
		t.Errorf("delete: %d", st)
	}
	var ds []webhook.DeliveryJSON
	n.call("GET", "/webhook/delivery?webhookID="+mine.ID, nil, &ds)
	var one webhook.DeliveryJSON
	if len(ds) != 1 || n.call("GET", "/webhook/delivery/"+ds[0].ID, nil, &one) != 200 || !bytes.Contains(one.Payload, []byte(req.ID)) {
		t.Errorf("deliveries %+v; one %+v", ds, one)
	}
	n.waitDeliveries(allDelivered(3))
	metrics := n.metrics()
	for _, want := range []string{"agentd_webhook_sent_total 3", `agentd_webhook_deliveries{state="pending"} 0`, `agentd_webhook_deliveries{state="failed"} 0`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// TestWebhookAfterRestart: a delivery its receiver refused until the
// node stopped is sent by the next node on the same database, once, and
// before the next run's.
func TestWebhookAfterRestart(t *testing.T) {
	t.Parallel()
	rcv := newHookReceiver(t, 1<<30)
	n := startNode(t, withWebhooks)
	sid := n.session()
	if st := n.call("POST", "/webhook", map[string]any{"url": rcv.srv.URL}, nil); st != 200 {
		t.Fatal(st)
	}
	n.send(sid, "reply:before")
	n.waitDeliveries(func(ds []webhook.DeliveryJSON) bool { return len(ds) == 1 && ds[0].Attempts >= 2 })
	n2 := n.restart(func(*app.Config) {
		rcv.mu.Lock()
		rcv.fail = 0
		rcv.mu.Unlock()
	})
	n2.send(sid, "reply:after")
	got := rcv.wait(2)
	if runEnded(t, got[0]).Response.Text != "before" || runEnded(t, got[1]).Response.Text != "after" {
		t.Errorf("after the restart: %+v", got)
	}
	n2.waitDeliveries(allDelivered(2))
}

// allDelivered holds when there are n deliveries, all delivered.
func allDelivered(n int) func([]webhook.DeliveryJSON) bool {
	return func(ds []webhook.DeliveryJSON) bool {
		for _, d := range ds {
			if d.State != "delivered" {
				return false
			}
		}
		return len(ds) == n
	}
}

// waitDeliveries polls GET /webhook/delivery until ok holds.
func (n *node) waitDeliveries(ok func([]webhook.DeliveryJSON) bool) []webhook.DeliveryJSON {
	n.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var ds []webhook.DeliveryJSON
		n.call("GET", "/webhook/delivery", nil, &ds)
		if ok(ds) {
			return ds
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("deliveries never reached the state wanted: %+v", ds)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (n *node) metrics() string {
	n.t.Helper()
	resp, err := http.Get(n.app.URL() + "/metrics")
	if err != nil {
		n.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestWebhooksConfig: agentd.webhooks is the operator's: a secret too
// short to sign with, or a bad allow entry or duration, refuses the
// configuration (and a node refuses to start with such a secret); the
// project's agentd.json cannot set webhooks and is said to be ignored;
// without a secret webhooks are off and callbacks are refused.
func TestWebhooksConfig(t *testing.T) {
	t.Setenv("AGENTD_TEST_HOOK_SECRET", "from-the-environment-0123")
	cfg, _, err := app.Configure(app.Setup{Workspace: t.TempDir(), ConfigFile: writeConfig(t,
		`{"agentd":{"webhooks":{"secret":"{env:AGENTD_TEST_HOOK_SECRET}","allow":["127.0.0.1","10.0.0.0/8"],"retryFor":"1h","timeout":"5s"}}}`)}, app.Config{})
	if err != nil || cfg.Webhooks.Secret != "from-the-environment-0123" || len(cfg.Webhooks.Allow) != 2 || cfg.Webhooks.RetryFor != time.Hour || cfg.Webhooks.Timeout != 5*time.Second {
		t.Fatalf("configured webhooks: %+v %v", cfg.Webhooks, err)
	}
	for _, bad := range []string{`{"agentd":{"webhooks":{"secret":"short"}}}`, `{"agentd":{"webhooks":{"allow":["127.0.0.1"]}}}`,
		`{"agentd":{"webhooks":{"secret":"{env:AGENTD_TEST_UNSET_SECRET}"}}}`, `{"agentd":{"webhooks":{"secret":"0123456789abcdefgh","allow":["intranet"]}}}`,
		`{"agentd":{"webhooks":{"secret":"0123456789abcdefgh","retryFor":"forever"}}}`, `{"agentd":{"webhooks":{"secrets":"0123456789abcdefgh"}}}`} {
		if _, _, err := app.Configure(app.Setup{Workspace: t.TempDir(), ConfigFile: writeConfig(t, bad)}, app.Config{}); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "agentd.json"), []byte(`{"agentd":{"webhooks":{"secret":"the-model-wrote-this-one","allow":["0.0.0.0/0"]}}}`), 0o600)
	cfg, loaded, err := app.Configure(app.Setup{Workspace: ws}, app.Config{})
	warned := false
	for _, w := range loaded.Warnings {
		warned = warned || w.Key == "agentd.webhooks"
	}
	if err != nil || cfg.Webhooks.Secret != "" || !warned {
		t.Errorf("the project's webhooks: %+v %v; warned %v", cfg.Webhooks, err, warned)
	}
	c := app.Config{DBPath: filepath.Join(t.TempDir(), "a.db"), Host: "127.0.0.1", Logger: quietLogger(), Webhooks: webhook.Config{Secret: "short"}}
	if a, err := app.Start(t.Context(), c); err == nil {
		a.Stop(t.Context())
		t.Error("a node started with a short secret")
	}
	off := startNode(t)
	sid := off.session()
	body := map[string]any{"parts": []map[string]string{{"type": "text", "text": "reply:x"}}, "callbackUrl": "https://example.com/hook"}
	if st := off.call("POST", "/session/"+sid+"/prompt_async", body, nil); st != 400 {
		t.Errorf("a callback with webhooks off: %d", st)
	}
	var ds []webhook.DeliveryJSON
	if st := off.call("POST", "/webhook", map[string]any{"url": "https://example.com"}, nil); st != 400 || off.call("GET", "/webhook/delivery", nil, &ds) != 200 {
		t.Errorf("routes with webhooks off: subscribe %d", st)
	}
}

// TestWebhooksAndKeys: an API key that sees only its own sessions may not
// subscribe (a server-wide subscription would report every session) nor
// read the deliveries (their payloads are every session's); it gives its
// prompts a callbackUrl, which reports its own run. A key granted all
// sessions and the operator use the routes.
func TestWebhooksAndKeys(t *testing.T) {
	t.Parallel()
	rcv := newHookReceiver(t, 0)
	k := startKeyed(t, withWebhooks)
	own, ownC := k.key("own", "own", nil)
	all, _ := k.key("all", "all", nil)
	for _, r := range [][3]string{{"POST", "/webhook", `{"url":"` + rcv.srv.URL + `"}`}, {"GET", "/webhook", ""},
		{"GET", "/webhook/delivery", ""}, {"GET", "/webhook/whk_x", ""}, {"POST", "/webhook/delivery/whd_x/retry", ""}} {
		if st, body := k.raw(r[0], r[1], own.Token, r[2]); st != http.StatusForbidden {
			t.Errorf("own key: %s %s: %d %s, want 403", r[0], r[1], st, body)
		}
	}
	if st, body := k.raw("POST", "/webhook", all.Token, `{"url":"`+rcv.srv.URL+`/all","events":["ask.waiting"]}`); st != 200 {
		t.Errorf("a key granted all sessions subscribes: %d %s", st, body)
	}
	if st, body := k.raw("GET", "/webhook/delivery", "", ""); st != 200 {
		t.Errorf("the operator lists the deliveries: %d %s", st, body)
	}
	s, err := ownC.CreateSession(t.Context(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	body := `{"parts":[{"type":"text","text":"reply:mine"}],"callbackUrl":"` + rcv.srv.URL + `/cb"}`
	if st, b := k.raw("POST", "/session/"+s.ID+"/prompt_async", own.Token, body); st != 204 {
		t.Fatalf("own key's prompt with a callbackUrl: %d %s", st, b)
	}
	if got := rcv.wait(1); got[0].SessionID != s.ID {
		t.Errorf("callback %+v", got[0])
	}
}
