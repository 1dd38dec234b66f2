package webhook_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/engine"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/webhook"
)

func TestSignVerify(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	body := []byte(`{"id":"whd_1"}`)
	h := webhook.Sign(secret, now, body)
	if !strings.HasPrefix(h, "t=1700000000,v1=") || len(h) != len("t=1700000000,v1=")+64 {
		t.Fatalf("header %q", h)
	}
	if err := webhook.Verify(secret, h, body, now.Add(time.Minute), 5*time.Minute); err != nil {
		t.Errorf("a good signature: %v", err)
	}
	for name, c := range map[string]struct {
		secret, header string
		body           []byte
		at             time.Time
	}{
		"other body":   {secret, h, []byte(`{"id":"whd_2"}`), now},
		"other secret": {"another-secret-of-16+", h, body, now},
		"replayed":     {secret, h, body, now.Add(10 * time.Minute)},
		"no v1":        {secret, "t=1700000000", body, now},
		"garbage":      {secret, "v1=ab,t=x", body, now},
	} {
		if err := webhook.Verify(c.secret, c.header, c.body, c.at, 5*time.Minute); err == nil {
			t.Errorf("%s: verified", name)
		}
	}
	for _, bad := range []string{"", "short", " 0123456789abcdef "} {
		if webhook.CheckSecret(bad) == nil {
			t.Errorf("secret %q accepted", bad)
		}
	}
	if _, err := webhook.New(nil, nil, nil, webhook.Config{Secret: "short"}); err == nil {
		t.Error("a service with a short secret was built")
	}
}

// TestRunEndsArriveOnceInOrder: a receiver that fails every delivery twice
// gets every run end, each once after it accepts it, signed, in the order
// the runs ended in each session; no delivery is tried while an earlier one
// of its session is pending.
func TestRunEndsArriveOnceInOrder(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, 2)
	e := newEnv(t, webhook.Config{Allow: loopback, Backoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond})
	e.subscribe(store.Webhook{URL: rcv.srv.URL + "/hook?token=x"})
	a, b := e.session(), e.session()
	var runs []core.Run
	for i := range 4 {
		runs = append(runs, e.runEnds(a, "answer "+string(rune('0'+i)), nil))
		runs = append(runs, e.runEnds(b, "other", nil))
	}
	got := rcv.waitAccepted(t, len(runs))
	e.waitDeliveries(allIn(store.DeliveryDelivered, len(runs)))
	if n := len(rcv.accepted()); n != len(runs) {
		t.Fatalf("%d deliveries accepted, want %d", n, len(runs))
	}
	bySession := map[string][]string{}
	for _, q := range got {
		if err := webhook.Verify(secret, q.signature, q.body, time.Now(), time.Minute); err != nil {
			t.Errorf("delivery %s: %v", q.delivery, err)
		}
		if q.env.ID != q.delivery || q.event != webhook.EventRunEnded || q.env.Type != webhook.EventRunEnded || q.attempt != 3 {
			t.Errorf("request %+v", q)
		}
		var data webhook.RunEnded
		if err := json.Unmarshal(q.env.Data, &data); err != nil || data.Outcome != core.RunSucceeded || data.Response == nil {
			t.Errorf("data %s: %v", q.env.Data, err)
		}
		bySession[q.env.SessionID] = append(bySession[q.env.SessionID], data.RunID)
	}
	var wantA, wantB []string
	for _, r := range runs {
		if r.SessionID == a {
			wantA = append(wantA, r.ID)
		} else {
			wantB = append(wantB, r.ID)
		}
	}
	if strings.Join(bySession[a], " ") != strings.Join(wantA, " ") || strings.Join(bySession[b], " ") != strings.Join(wantB, " ") {
		t.Errorf("order per session:\n got %v\nwant %v and %v", bySession, wantA, wantB)
	}
	inOrder(t, rcv.requests())
}

// inOrder checks that no attempt of a session's delivery came before the
// acceptance of the session's earlier one.
func inOrder(t *testing.T, reqs []request) {
	t.Helper()
	last := map[string]int64{} // session: seq of the last accepted
	for _, q := range reqs {
		if q.env.Seq < last[q.env.SessionID] {
			t.Errorf("seq %d tried after seq %d was accepted", q.env.Seq, last[q.env.SessionID])
		}
		for _, p := range reqs {
			if p.env.SessionID == q.env.SessionID && p.env.Seq < q.env.Seq && p.status == http.StatusOK && p.at.After(q.at) {
				t.Errorf("seq %d tried before seq %d of its session was accepted", q.env.Seq, p.env.Seq)
			}
		}
		if q.status == http.StatusOK {
			last[q.env.SessionID] = q.env.Seq
		}
	}
}

// TestCallbackAndFilters: a callback gets the end of its message's run
// only, once; a session's subscription gets only its session's events of
// the types it named; an ask is reported with its request.
func TestCallbackAndFilters(t *testing.T) {
	t.Parallel()
	cb, sub := newReceiver(t, 0), newReceiver(t, 0)
	e := newEnv(t, webhook.Config{Allow: loopback})
	a, b := e.session(), e.session()
	e.subscribe(store.Webhook{URL: sub.srv.URL, SessionID: a, Events: []string{webhook.EventAskWaiting}})
	mine := e.runEnds(a, "the answer", func(_, msg string) {
		if err := e.svc.Register(ctxOf(t), a, msg, cb.srv.URL+"/cb"); err != nil {
			t.Fatal(err)
		}
	})
	e.runEnds(a, "not mine", nil)
	e.ask(b)
	p := e.ask(a)
	got := cb.waitAccepted(t, 1)
	asks := sub.waitAccepted(t, 1)
	e.waitDeliveries(allIn(store.DeliveryDelivered, 2))
	var data webhook.RunEnded
	json.Unmarshal(got[0].env.Data, &data)
	if data.RunID != mine.ID || data.Response.Text != "the answer" || got[0].env.Session == nil || got[0].env.Session.ID != a {
		t.Errorf("callback got %s", got[0].body)
	}
	var ask webhook.AskWaiting
	json.Unmarshal(asks[0].env.Data, &ask)
	var req core.PermissionRequest
	json.Unmarshal(ask.Request, &req)
	if ask.Kind != "permission" || req.ID != p.ID || ask.RunID != "run_x" || asks[0].env.SessionID != a {
		t.Errorf("ask got %s", asks[0].body)
	}
	if n, m := len(cb.requests()), len(sub.requests()); n != 1 || m != 1 {
		t.Errorf("requests: callback %d, subscription %d; want 1 each", n, m)
	}
}

// TestRefusedAddress: an address the operator did not open is refused
// when a callback names it, and a name that leads there fails its
// delivery at once, at dial time, without a request reaching it.
func TestRefusedAddress(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, 0)
	e := newEnv(t, webhook.Config{})
	sid := e.session()
	var ie *engine.InputError
	if err := e.svc.Register(ctxOf(t), sid, "msg_1", rcv.srv.URL); !errors.As(err, &ie) || !strings.Contains(err.Error(), "agentd.webhooks.allow") {
		t.Errorf("a callback to %s: %v", rcv.srv.URL, err)
	}
	for _, u := range []string{"ftp://example.com/", "http:///x", "http://169.254.169.254/latest", "http://[::1]:80/"} {
		if err := e.svc.CheckURL("url", u); err == nil {
			t.Errorf("%s accepted", u)
		}
	}
	byName := strings.Replace(rcv.srv.URL, "127.0.0.1", "localhost", 1)
	e.subscribe(store.Webhook{URL: byName})
	e.runEnds(sid, "x", nil)
	list := e.waitDeliveries(allIn(store.DeliveryFailed, 1))
	if list[0].Attempts != 1 || !strings.Contains(list[0].LastError, "on this machine or a private network") {
		t.Errorf("delivery %+v", list[0])
	}
	if n := len(rcv.requests()); n != 0 {
		t.Errorf("the refused receiver got %d requests", n)
	}
}

// TestRetriesBounded: a receiver that never accepts is retried until
// RetryFor has passed, then the delivery is failed with the last error;
// a retry makes it pending again under the same id.
func TestRetriesBounded(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, 1<<30)
	// RetryFor leaves room for several attempts on a loaded machine.
	e := newEnv(t, webhook.Config{Allow: loopback, RetryFor: time.Second, Backoff: 20 * time.Millisecond,
		MaxBackoff: 40 * time.Millisecond})
	e.subscribe(store.Webhook{URL: rcv.srv.URL})
	e.runEnds(e.session(), "x", nil)
	list := e.waitDeliveries(allIn(store.DeliveryFailed, 1))
	d := list[0]
	// Given up only when the next try would come after the deadline.
	if d.Attempts < 2 || d.LastStatus != 500 || !strings.Contains(d.LastError, "500") || d.Ended < d.Deadline-40 {
		t.Errorf("failed delivery %+v", d)
	}
	rcv.mu.Lock()
	rcv.failures = 0
	rcv.mu.Unlock()
	e.tx(func(tx store.Tx) error { return tx.(store.WebhookTx).RetryDelivery(ctxOf(t), d.ID, time.Hour) })
	e.svc.Stop()
	e.start() // a new process picks the retried delivery up
	e.waitDeliveries(allIn(store.DeliveryDelivered, 1))
	if got := rcv.accepted(); len(got) != 1 || got[0].delivery != d.ID {
		t.Errorf("accepted %+v", got)
	}
}

// TestStopResumes: a delivery cut by Stop is sent again by the next
// process, with the same id; events written while no process relayed are
// relayed when one starts.
func TestStopResumes(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, 0)
	rcv.hold = make(chan struct{})
	e := newEnv(t, webhook.Config{Allow: loopback})
	e.subscribe(store.Webhook{URL: rcv.srv.URL})
	sid := e.session()
	e.runEnds(sid, "first", nil)
	e.waitDeliveries(func(l []store.Delivery) bool { return len(l) == 1 && l[0].Attempts == 1 })
	e.svc.Stop()
	e.runEnds(sid, "while stopped", nil)
	close(rcv.hold)
	e.start()
	rcv.waitAccepted(t, 2)
	list := e.waitDeliveries(allIn(store.DeliveryDelivered, 2))
	// The cut attempt may have reached the receiver as the first process
	// stopped; the second process sent it again, under the same id.
	again := false
	for _, q := range rcv.requests() {
		again = again || q.delivery == list[0].ID && q.attempt == 2 && q.status == http.StatusOK
	}
	if !again || list[0].Attempts != 2 || list[1].Attempts != 1 {
		t.Errorf("deliveries %+v; the first was not sent again by the second process", list)
	}
}
