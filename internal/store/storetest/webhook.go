package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// webhookTx runs fn with the transaction's webhook side.
func webhookTx(t *testing.T, s store.Store, fn func(tx store.WebhookTx) error) {
	t.Helper()
	mustTx(t, s, func(tx store.Tx) error {
		wt, ok := tx.(store.WebhookTx)
		if !ok {
			t.Fatalf("%T does not implement store.WebhookTx", tx)
		}
		return fn(wt)
	})
}

func webhookReader(t *testing.T, s store.Store) store.WebhookReader {
	t.Helper()
	r, ok := s.(store.WebhookReader)
	if !ok {
		t.Fatalf("%T does not implement store.WebhookReader", s)
	}
	return r
}

// testWebhookSubscriptions: subscriptions are kept as written, listed per
// session or all, refused for a session that does not exist, deleted by
// id, and go with their session.
func testWebhookSubscriptions(t *testing.T, s store.Store, reopen func() store.Store) {
	a := NewSession("/w", 1)
	insertSession(t, s, a)
	all := store.Webhook{ID: "whk_all", URL: "https://example.com/all", Created: 5}
	one := store.Webhook{ID: "whk_one", URL: "https://example.com/one", Events: []string{"run.ended"}, SessionID: a.ID, Created: 6}
	webhookTx(t, s, func(tx store.WebhookTx) error {
		if err := tx.PutWebhook(ctx(t), all); err != nil {
			return err
		}
		return tx.PutWebhook(ctx(t), one)
	})
	err := s.Tx(ctx(t), func(tx store.Tx) error {
		return tx.(store.WebhookTx).PutWebhook(ctx(t), store.Webhook{ID: "whk_x", URL: "u", SessionID: "ses_missing"})
	})
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a subscription to a missing session: %v, want ErrNotFound", err)
	}
	r := webhookReader(t, reopen())
	list, err := r.Webhooks(ctx(t), "")
	if err != nil || len(list) != 2 || list[0].ID != all.ID || list[1].ID != one.ID {
		t.Fatalf("all subscriptions: %+v %v", list, err)
	}
	if list[0].SessionID != "" || len(list[0].Events) != 0 || list[1].Events[0] != "run.ended" || list[1].SessionID != a.ID || list[1].Created != 6 {
		t.Errorf("read back: %+v", list)
	}
	if list, _ := r.Webhooks(ctx(t), a.ID); len(list) != 1 || list[0].ID != one.ID {
		t.Errorf("the session's subscriptions: %+v", list)
	}
	if _, err := r.Webhook(ctx(t), "whk_none"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing subscription: %v", err)
	}
	webhookTx(t, s, func(tx store.WebhookTx) error { return tx.DeleteWebhook(ctx(t), all.ID) })
	mustTx(t, s, func(tx store.Tx) error { return tx.DeleteSession(ctx(t), a.ID) })
	if list, _ := r.Webhooks(ctx(t), ""); len(list) != 0 {
		t.Errorf("after delete and the session's end: %+v", list)
	}
}

// testWebhookCallbacks: a message's callback is found by the run the
// message belongs to, once; the relay's cursor moves and is read back.
func testWebhookCallbacks(t *testing.T, s store.Store, reopen func() store.Store) {
	a := NewSession("/w", 1)
	insertSession(t, s, a)
	run := newRun(a.ID, core.RunRunning, 1)
	u := userMessage(a.ID)
	u.RunID = run.ID
	mustTx(t, s, func(tx store.Tx) error {
		if err := tx.InsertRun(ctx(t), run); err != nil {
			return err
		}
		return tx.PutMessage(ctx(t), u)
	})
	webhookTx(t, s, func(tx store.WebhookTx) error {
		if err := tx.PutCallback(ctx(t), store.Callback{SessionID: a.ID, MessageID: u.ID, URL: "https://old", Created: 1}); err != nil {
			return err
		}
		if err := tx.PutCallback(ctx(t), store.Callback{SessionID: a.ID, MessageID: "msg_other", URL: "https://other", Created: 1}); err != nil {
			return err
		}
		return tx.PutCallback(ctx(t), store.Callback{SessionID: a.ID, MessageID: u.ID, URL: "https://new", Created: 2})
	})
	err := s.Tx(ctx(t), func(tx store.Tx) error {
		return tx.(store.WebhookTx).PutCallback(ctx(t), store.Callback{SessionID: "ses_missing", MessageID: u.ID, URL: "u"})
	})
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a callback in a missing session: %v, want ErrNotFound", err)
	}
	s = reopen()
	webhookTx(t, s, func(tx store.WebhookTx) error {
		// A refused retry of an admitted prompt leaves its callback.
		if err := tx.DeleteCallback(ctx(t), a.ID, u.ID); err != nil {
			return err
		}
		return tx.DeleteCallback(ctx(t), a.ID, "msg_other")
	})
	webhookTx(t, s, func(tx store.WebhookTx) error {
		urls, err := tx.TakeRunCallbacks(ctx(t), run.ID)
		if err != nil || len(urls) != 1 || urls[0] != "https://new" {
			t.Errorf("the run's callbacks: %v %v", urls, err)
		}
		if urls, _ := tx.TakeRunCallbacks(ctx(t), run.ID); len(urls) != 0 {
			t.Errorf("taken twice: %v", urls)
		}
		c, err := tx.LockWebhookCursor(ctx(t))
		if err != nil {
			return err
		}
		return tx.SetWebhookCursor(ctx(t), c+42)
	})
	if c, err := webhookReader(t, reopen()).WebhookCursor(ctx(t)); err != nil || c < 42 {
		t.Errorf("cursor after a move: %d %v", c, err)
	}
}

func delivery(seq int64, url, session string) store.Delivery {
	return store.Delivery{ID: core.NewID("whd", false), Seq: seq, Target: "whk_t", URL: url, SessionID: session,
		Type: "run.ended", Body: []byte(fmt.Sprintf(`{"seq":%d}`, seq))}
}

func claim(t *testing.T, s store.Store, owner string, lease time.Duration) []store.Delivery {
	t.Helper()
	var got []store.Delivery
	webhookTx(t, s, func(tx store.WebhookTx) (err error) {
		got, err = tx.ClaimDeliveries(ctx(t), owner, lease, 10)
		return err
	})
	return got
}

func endAttempt(t *testing.T, s store.Store, a store.Attempt) string {
	t.Helper()
	var state string
	webhookTx(t, s, func(tx store.WebhookTx) (err error) {
		state, err = tx.EndAttempt(ctx(t), a)
		return err
	})
	return state
}

func seqsOfDeliveries(ds []store.Delivery) []int64 {
	var out []int64
	for _, d := range ds {
		out = append(out, d.Seq)
	}
	return out
}

// testWebhookDeliveries: a delivery is derived once per seq, target and
// URL; claims take only the first pending delivery of each line (URL and
// session), hold it against other owners, count attempts; an attempt's
// end is recorded only by the lease it was made under; failures wait and
// then fail at the deadline or at once when final; a failed delivery can
// be retried; leases are released; ended deliveries are pruned.
func testWebhookDeliveries(t *testing.T, s store.Store, reopen func() store.Store) {
	d1, d2, d3 := delivery(10, "https://a", "ses_1"), delivery(11, "https://a", "ses_1"), delivery(12, "https://a", "ses_2")
	webhookTx(t, s, func(tx store.WebhookTx) error {
		for _, d := range []store.Delivery{d2, d1, d3, delivery(10, "https://a", "ses_1")} {
			if err := tx.InsertDelivery(ctx(t), d, time.Hour); err != nil {
				return err
			}
		}
		return nil
	})
	r := webhookReader(t, s)
	if wait, ok, err := r.NextDelivery(ctx(t)); err != nil || !ok || wait > 0 {
		t.Errorf("next delivery: %v %v %v, want one due", wait, ok, err)
	}
	got := claim(t, s, "n1", time.Hour)
	if fmt.Sprint(seqsOfDeliveries(got)) != "[10 12]" || got[0].Attempts != 1 || string(got[0].Body) != `{"seq":10}` || got[0].LeaseOwner != "n1" {
		t.Fatalf("first claim: %+v, want seqs 10 and 12 (11 waits behind 10)", got)
	}
	if again := claim(t, s, "n2", time.Hour); len(again) != 0 {
		t.Fatalf("a second owner claimed %v while n1 holds them", seqsOfDeliveries(again))
	}
	first := got[0]
	if st := endAttempt(t, s, store.Attempt{ID: first.ID, Owner: "n2", Attempt: 1, OK: true}); st != "" {
		t.Errorf("another owner recorded the attempt: %q", st)
	}
	if st := endAttempt(t, s, store.Attempt{ID: first.ID, Owner: "n1", Attempt: 1, Status: 500, Error: "boom"}); st != store.DeliveryPending {
		t.Fatalf("the owner's failed attempt: %q, want pending", st)
	}
	got = claim(t, s, "n2", time.Hour)
	if len(got) != 1 || got[0].ID != first.ID || got[0].Attempts != 2 || got[0].LastError != "boom" || got[0].LastStatus != 500 {
		t.Fatalf("after a failure due at once: %+v", got)
	}
	if st := endAttempt(t, s, store.Attempt{ID: first.ID, Owner: "n2", Attempt: 2, OK: true}); st != store.DeliveryDelivered {
		t.Fatalf("the new owner's success: %q", st)
	}
	s = reopen()
	deliveriesGoOn(t, s, reopen, d2, d3)
}

// deliveriesGoOn continues testWebhookDeliveries after a reopen.
func deliveriesGoOn(t *testing.T, s store.Store, reopen func() store.Store, d2, d3 store.Delivery) {
	got := claim(t, s, "n1", time.Hour)
	if len(got) != 1 || got[0].ID != d2.ID {
		t.Fatalf("after the first of the line was delivered: %+v, want seq 11", got)
	}
	if st := endAttempt(t, s, store.Attempt{ID: d2.ID, Owner: "n1", Attempt: 1, Error: "refused", Final: true}); st != store.DeliveryFailed {
		t.Fatalf("final failure: %q", st)
	}
	webhookTx(t, s, func(tx store.WebhookTx) error { return tx.ReleaseDeliveries(ctx(t), "n1") })
	got = claim(t, s, "n3", time.Hour)
	if len(got) != 1 || got[0].ID != d3.ID || got[0].Attempts != 2 {
		t.Fatalf("released delivery: %+v", got)
	}
	// Past its deadline, a failed attempt fails the delivery.
	if st := endAttempt(t, s, store.Attempt{ID: d3.ID, Owner: "n3", Attempt: 2, Status: 503, Retry: 2 * time.Hour}); st != store.DeliveryFailed {
		t.Errorf("a retry past the deadline: %q, want failed", st)
	}
	deliveriesListed(t, s, reopen, d2, d3)
}

// deliveriesListed continues testWebhookDeliveries: counts, lists, pages,
// a retry and the pruning of what ended.
func deliveriesListed(t *testing.T, s store.Store, reopen func() store.Store, d2, d3 store.Delivery) {
	r := webhookReader(t, s)
	if _, ok, _ := r.NextDelivery(ctx(t)); ok {
		t.Error("a delivery is pending after all ended")
	}
	pending, failed, err := r.DeliveryCounts(ctx(t))
	if err != nil || pending != 0 || failed != 2 {
		t.Errorf("counts: pending %d failed %d %v", pending, failed, err)
	}
	list, err := r.Deliveries(ctx(t), store.DeliveryQuery{State: store.DeliveryFailed})
	if err != nil || len(list) != 2 || list[0].ID != d3.ID || list[1].LastError != "refused" || list[0].Ended == 0 {
		t.Fatalf("failed deliveries, newest first: %+v %v", list, err)
	}
	if page, _ := r.Deliveries(ctx(t), store.DeliveryQuery{BeforeSeq: list[0].Seq, BeforeID: list[0].ID, Limit: 1}); len(page) != 1 || page[0].ID != d2.ID {
		t.Errorf("next page: %+v", page)
	}
	if ses, _ := r.Deliveries(ctx(t), store.DeliveryQuery{SessionID: "ses_1"}); len(ses) != 2 {
		t.Errorf("one session's deliveries: %+v", ses)
	}
	deliveriesRetried(t, s, reopen, d3)
}

// deliveriesRetried continues testWebhookDeliveries: a failed delivery
// retried, and the pruning of what ended.
func deliveriesRetried(t *testing.T, s store.Store, reopen func() store.Store, d3 store.Delivery) {
	r := webhookReader(t, s)
	webhookTx(t, s, func(tx store.WebhookTx) error {
		if err := tx.RetryDelivery(ctx(t), d3.ID, time.Hour); err != nil {
			return err
		}
		if err := tx.RetryDelivery(ctx(t), d3.ID, time.Hour); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("retry of a pending delivery: %v", err)
		}
		return nil
	})
	if got := claim(t, reopen(), "n4", time.Hour); len(got) != 1 || got[0].ID != d3.ID || got[0].Attempts != 3 {
		t.Errorf("retried delivery: %+v", got)
	}
	var n int64
	webhookTx(t, s, func(tx store.WebhookTx) (err error) {
		n, err = tx.PruneDeliveries(ctx(t), time.Now().Add(time.Hour).UnixMilli())
		return err
	})
	if d, err := r.Delivery(ctx(t), d3.ID); n != 2 || err != nil || d.State != store.DeliveryPending {
		t.Errorf("pruned %d; the pending one: %+v %v", n, d, err)
	}
}

// testWebhookClaimsOnce: owners claiming at the same time, each in its own
// transaction, take every delivery exactly once; a lease that expires
// lets another owner take the delivery over.
func testWebhookClaimsOnce(t *testing.T, s store.Store, _ func() store.Store) {
	const n = 40
	webhookTx(t, s, func(tx store.WebhookTx) error {
		for i := range n {
			if err := tx.InsertDelivery(ctx(t), delivery(int64(i+1), "https://a", fmt.Sprintf("ses_%d", i)), time.Hour); err != nil {
				return err
			}
		}
		return nil
	})
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for {
				var got []store.Delivery
				err := s.Tx(ctx(t), func(tx store.Tx) (err error) {
					got, err = tx.(store.WebhookTx).ClaimDeliveries(ctx(t), fmt.Sprintf("n%d", w), time.Hour, 3)
					return err
				})
				if err != nil {
					t.Errorf("claim: %v", err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, d := range got {
					seen[d.ID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != n {
		t.Errorf("%d deliveries claimed, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("delivery %s claimed %d times", id, c)
		}
	}
	webhookTx(t, s, func(tx store.WebhookTx) error {
		return tx.InsertDelivery(ctx(t), delivery(n+1, "https://b", "ses_x"), time.Hour)
	})
	if got := claim(t, s, "short", time.Millisecond); len(got) != 1 {
		t.Fatalf("claim: %+v", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(claim(t, s, "taker", time.Hour)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("an expired lease was never taken over")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
