package webhook_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/events"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/sqlite"
	"github.com/agentd/agentd/internal/webhook"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const secret = "0123456789abcdef-test-secret"

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}

// env is a store, its event hub and the webhooks over them, as a node
// assembles them.
type env struct {
	t   *testing.T
	st  *sqlite.Store
	hub *events.Hub
	svc *webhook.Service
	cfg webhook.Config
}

func newEnv(t *testing.T, cfg webhook.Config) *env {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "agentd.db"), sqlite.Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	_, last, err := st.EventBounds(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	hub := events.NewHub(st, last, 0)
	st.SetCommitHook(hub.Publish)
	e := &env{t: t, st: st, hub: hub, cfg: cfg}
	t.Cleanup(func() {
		e.svc.Stop()
		st.Close()
	})
	e.start()
	return e
}

// start builds and starts the service (again, after stop).
func (e *env) start() {
	e.t.Helper()
	cfg := e.cfg
	if cfg.Secret == "" {
		cfg.Secret = secret
	}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, err := webhook.New(e.st, e.st, e.hub, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := svc.Start(e.t.Context()); err != nil {
		e.t.Fatal(err)
	}
	e.svc = svc
}

func (e *env) tx(fn func(tx store.Tx) error) {
	e.t.Helper()
	if err := e.st.Tx(e.t.Context(), fn); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) session() string {
	e.t.Helper()
	s := core.Session{ID: core.NewID(core.PrefixSession, true), Slug: "s", ProjectID: "global", Directory: "/w", Title: "t",
		Time: core.SessionTime{Created: 1, Updated: 1}}
	e.tx(func(tx store.Tx) error { return tx.InsertSession(e.t.Context(), s) })
	return s.ID
}

func (e *env) subscribe(w store.Webhook) {
	e.t.Helper()
	if w.ID == "" {
		w.ID = core.NewID(webhook.PrefixWebhook, false)
	}
	e.tx(func(tx store.Tx) error { return tx.(store.WebhookTx).PutWebhook(e.t.Context(), w) })
}

// runEnds writes a run of the session, its answer and its end (the
// terminal run.updated the engine's finish writes), in one transaction as
// the engine does; before runs in the transaction before it, so that a
// callback can be registered for its user message.
func (e *env) runEnds(sid, answer string, before func(runID, userMsg string)) core.Run {
	e.t.Helper()
	ctx := e.t.Context()
	run := core.Run{ID: core.NewID(core.PrefixRun, false), SessionID: sid, State: core.RunRunning, Time: core.RunTime{Created: 1}}
	u := core.Message{ID: core.NewID(core.PrefixMessage, false), SessionID: sid, Role: core.RoleUser, RunID: run.ID, Created: 1}
	e.tx(func(tx store.Tx) error {
		if err := tx.InsertRun(ctx, run); err != nil {
			return err
		}
		return tx.PutMessage(ctx, u)
	})
	if before != nil {
		before(run.ID, u.ID)
	}
	a := core.Message{ID: core.NewID(core.PrefixMessage, false), SessionID: sid, Role: core.RoleAssistant, RunID: run.ID, Created: 2}
	run.State, run.Time.Ended = core.RunSucceeded, time.Now().UnixMilli()
	e.tx(func(tx store.Tx) error {
		if err := tx.PutMessage(ctx, a); err != nil {
			return err
		}
		p := core.Part{ID: core.NewID(core.PrefixPart, false), SessionID: sid, MessageID: a.ID, Type: core.PartText, Text: answer}
		if err := tx.PutPart(ctx, p); err != nil {
			return err
		}
		if err := tx.UpdateRun(ctx, run); err != nil {
			return err
		}
		return tx.AppendEvent(ctx, core.MustEvent(sid, core.EventRunUpdated, core.RunProps{Run: run}))
	})
	return run
}

// ask writes a pending permission request and its permission.asked.
func (e *env) ask(sid string) core.PermissionRequest {
	e.t.Helper()
	p := core.PermissionRequest{ID: core.NewID(core.PrefixPermission, false), SessionID: sid, Permission: "bash",
		Patterns: []string{"ls"}, RunID: "run_x"}
	e.tx(func(tx store.Tx) error {
		if err := tx.PutPermission(e.t.Context(), p); err != nil {
			return err
		}
		return tx.AppendEvent(e.t.Context(), core.MustEvent(sid, core.EventPermissionAsked, p.Opencode()))
	})
	return p
}

// deliveries lists every delivery, oldest first.
func (e *env) deliveries() []store.Delivery {
	e.t.Helper()
	list, err := e.st.Deliveries(e.t.Context(), store.DeliveryQuery{Limit: 1000})
	if err != nil {
		e.t.Fatal(err)
	}
	for i, j := 0, len(list)-1; i < j; i, j = i+1, j-1 {
		list[i], list[j] = list[j], list[i]
	}
	return list
}

// waitDeliveries waits until ok holds of the deliveries.
func (e *env) waitDeliveries(ok func([]store.Delivery) bool) []store.Delivery {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		list := e.deliveries()
		if ok(list) {
			return list
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("deliveries never reached the state wanted; last: %+v", list)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func allIn(state string, n int) func([]store.Delivery) bool {
	return func(list []store.Delivery) bool {
		if len(list) != n {
			return false
		}
		for _, d := range list {
			if d.State != state {
				return false
			}
		}
		return true
	}
}

// request is one request a receiver got.
type request struct {
	delivery, event, signature string
	attempt                    int
	body                       []byte
	env                        webhook.Envelope
	status                     int
	at                         time.Time
}

// receiver is a webhook receiver on 127.0.0.1 that fails the first
// failures attempts of each delivery (with 500) and accepts the next.
type receiver struct {
	srv      *httptest.Server
	failures int
	mu       sync.Mutex
	reqs     []request
	tries    map[string]int
	hold     chan struct{} // when set, requests wait on it
}

func newReceiver(t *testing.T, failures int) *receiver {
	r := &receiver{failures: failures, tries: map[string]int{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	if r.hold != nil {
		select {
		case <-r.hold:
		case <-req.Context().Done():
			return
		}
	}
	body, _ := io.ReadAll(req.Body)
	rec := request{delivery: req.Header.Get(webhook.HeaderDelivery), event: req.Header.Get(webhook.HeaderEvent),
		signature: req.Header.Get(webhook.HeaderSignature), body: body, at: time.Now()}
	rec.attempt, _ = strconv.Atoi(req.Header.Get(webhook.HeaderAttempt))
	_ = json.Unmarshal(body, &rec.env)
	r.mu.Lock()
	r.tries[rec.delivery]++
	rec.status = http.StatusOK
	if r.tries[rec.delivery] <= r.failures {
		rec.status = http.StatusInternalServerError
	}
	r.reqs = append(r.reqs, rec)
	r.mu.Unlock()
	w.WriteHeader(rec.status)
}

func (r *receiver) requests() []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]request(nil), r.reqs...)
}

// accepted is the first accepted request of each delivery, in the order
// the receiver accepted them.
func (r *receiver) accepted() []request {
	var out []request
	seen := map[string]bool{}
	for _, q := range r.requests() {
		if q.status == http.StatusOK && !seen[q.delivery] {
			seen[q.delivery] = true
			out = append(out, q)
		}
	}
	return out
}

func (r *receiver) waitAccepted(t *testing.T, n int) []request {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if got := r.accepted(); len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("receiver accepted %d deliveries, want %d; requests: %d", len(r.accepted()), n, len(r.requests()))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func ctxOf(t *testing.T) context.Context { return t.Context() }
