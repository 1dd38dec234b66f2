package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/access"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/engine"
	"github.com/agentd/agentd/internal/server"
	"github.com/agentd/agentd/internal/store"
)

// Subscription is a webhook subscription as the routes show it.
type Subscription struct {
	ID  string `json:"id"`
	URL string `json:"url"`
	// Events are the webhook event types sent (all of them when the
	// subscription named none).
	Events []string `json:"events"`
	// SessionID, when set, limits it to one session's events.
	SessionID string `json:"sessionID,omitempty"`
	Time      struct {
		Created int64 `json:"created"`
	} `json:"time"`
}

// subscriptionBody is what POST /webhook takes.
type subscriptionBody struct {
	URL string `json:"url" doc:"required"`
	// Events are the types to send (run.ended, ask.waiting); absent or
	// empty: all.
	Events    []string `json:"events"`
	SessionID string   `json:"sessionID"`
}

// DeliveryJSON is a delivery as the routes show it. WebhookID is the
// subscription's id; a prompt's callbackUrl has none.
type DeliveryJSON struct {
	ID         string `json:"id"`
	WebhookID  string `json:"webhookID,omitempty"`
	URL        string `json:"url"`
	SessionID  string `json:"sessionID"`
	Type       string `json:"type"`
	Seq        int64  `json:"seq"`
	State      string `json:"state"`
	Attempts   int    `json:"attempts"`
	LastStatus int    `json:"lastStatus,omitempty"`
	LastError  string `json:"lastError,omitempty"`
	// Node is the node sending it now (pending, claimed).
	Node string `json:"node,omitempty"`
	Time struct {
		Created  int64 `json:"created"`
		Next     int64 `json:"next,omitempty"`
		Deadline int64 `json:"deadline"`
		Ended    int64 `json:"ended,omitempty"`
	} `json:"time"`
	// Payload is the body sent (GET /webhook/delivery/{id} only).
	Payload json.RawMessage `json:"payload,omitempty"`
}

// Routes are the webhooks' routes, served behind the API's middleware.
func (s *Service) Routes() []server.Route {
	q := func(name, about string) server.Param { return server.Param{Name: name, Kind: "string", About: about} }
	routes := []server.Route{
		{Method: "POST", Pattern: "/webhook", Tag: "agentd", Handler: s.create,
			Summary: "Subscribe a URL to webhook events (run.ended, ask.waiting) of one session or all.",
			Doc:     server.RouteDoc{Body: subscriptionBody{}, Resp: Subscription{}}},
		{Method: "GET", Pattern: "/webhook", Tag: "agentd", Handler: s.list, Summary: "Webhook subscriptions, oldest first.",
			Doc: server.RouteDoc{Query: []server.Param{q("sessionID", "only this session's")}, Resp: []Subscription{}}},
		{Method: "GET", Pattern: "/webhook/{id}", Tag: "agentd", Handler: s.get, Summary: "One webhook subscription.",
			Doc: server.RouteDoc{Resp: Subscription{}}},
		{Method: "DELETE", Pattern: "/webhook/{id}", Tag: "agentd", Handler: s.remove,
			Summary: "Remove a webhook subscription (its deliveries already made stay).", Doc: server.RouteDoc{Resp: true}},
		{Method: "GET", Pattern: "/webhook/delivery", Tag: "agentd", Handler: s.deliveries,
			Summary: "Webhook deliveries, newest first, with their state, attempts and last error.",
			Doc: server.RouteDoc{Query: []server.Param{q("state", "pending, delivered or failed"), q("sessionID", "one session's"),
				q("webhookID", "one subscription's"), q("before", "continue after this delivery id"),
				{Name: "limit", Kind: "integer", About: "at most this many (default 100, at most 1000)"}}, Resp: []DeliveryJSON{}}},
		{Method: "GET", Pattern: "/webhook/delivery/{id}", Tag: "agentd", Handler: s.delivery,
			Summary: "One webhook delivery with the payload it sends.", Doc: server.RouteDoc{Resp: DeliveryJSON{}}},
		{Method: "POST", Pattern: "/webhook/delivery/{id}/retry", Tag: "agentd", Handler: s.retry,
			Summary: "Send a failed webhook delivery again (same id), with the retry time anew.", Doc: server.RouteDoc{Resp: DeliveryJSON{}}},
	}
	for i := range routes {
		routes[i].Handler = operatorOrAllKeys(routes[i].Handler)
	}
	return routes
}

// operatorOrAllKeys refuses the webhooks' routes to an API key that sees
// only its own sessions: a server-wide subscription would send it every
// session's run ends and asks, and the deliveries' payloads are every
// session's. Such a key gives its prompts a callbackUrl instead (the
// prompt's route checks that the session is the key's).
func operatorOrAllKeys(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if access.ListOwner(r.Context()) != "" {
			writeErr(w, http.StatusForbidden, "ForbiddenError", "API keys that see only their own sessions may not use "+r.URL.Path+
				": give a prompt a callbackUrl instead")
			return
		}
		h(w, r)
	}
}

func subscriptionOf(w store.Webhook) Subscription {
	out := Subscription{ID: w.ID, URL: w.URL, Events: w.Events, SessionID: w.SessionID}
	if out.Events == nil {
		out.Events = []string{}
	}
	out.Time.Created = w.Created
	return out
}

func deliveryOf(d store.Delivery) DeliveryJSON {
	out := DeliveryJSON{ID: d.ID, WebhookID: d.Target, URL: d.URL, SessionID: d.SessionID, Type: d.Type, Seq: d.Seq,
		State: d.State, Attempts: d.Attempts, LastStatus: d.LastStatus, LastError: d.LastError}
	out.Time.Created, out.Time.Deadline, out.Time.Ended = d.Created, d.Deadline, d.Ended
	if d.State == store.DeliveryPending {
		out.Time.Next, out.Node = d.Next, d.LeaseOwner
	}
	if len(d.Body) > 0 {
		out.Payload = d.Body
	}
	return out
}

func (s *Service) create(w http.ResponseWriter, r *http.Request) {
	var in subscriptionBody
	b, err := io.ReadAll(r.Body)
	if err == nil {
		err = json.Unmarshal(b, &in)
	}
	if err != nil {
		writeErr(w, http.StatusBadRequest, "BadRequest", "body: want {\"url\": …, \"events\"?: […], \"sessionID\"?: …}")
		return
	}
	if !s.Enabled() {
		writeErr(w, http.StatusBadRequest, "BadRequest", ErrOff.Error())
		return
	}
	if err := s.CheckURL("url", in.URL); err != nil {
		s.fail(w, err, "")
		return
	}
	for _, e := range in.Events {
		if !slices.Contains(EventTypes, e) {
			writeErr(w, http.StatusBadRequest, "BadRequest", fmt.Sprintf("events: %q: want %s", e, strings.Join(EventTypes, " or ")))
			return
		}
	}
	wh := store.Webhook{ID: core.NewID(PrefixWebhook, false), URL: in.URL, Events: in.Events, SessionID: in.SessionID,
		Created: time.Now().UnixMilli()}
	err = s.st.Tx(r.Context(), func(tx store.Tx) error { return tx.(store.WebhookTx).PutWebhook(r.Context(), wh) })
	if err != nil {
		s.fail(w, err, "session "+in.SessionID)
		return
	}
	writeJSON(w, http.StatusOK, subscriptionOf(wh))
}

func (s *Service) list(w http.ResponseWriter, r *http.Request) {
	list, err := s.rd.Webhooks(r.Context(), r.URL.Query().Get("sessionID"))
	if err != nil {
		s.fail(w, err, "")
		return
	}
	out := make([]Subscription, 0, len(list))
	for _, wh := range list {
		out = append(out, subscriptionOf(wh))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Service) get(w http.ResponseWriter, r *http.Request) {
	wh, err := s.rd.Webhook(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, err, "webhook "+r.PathValue("id"))
		return
	}
	writeJSON(w, http.StatusOK, subscriptionOf(wh))
}

func (s *Service) remove(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	err := s.st.Tx(r.Context(), func(tx store.Tx) error { return tx.(store.WebhookTx).DeleteWebhook(r.Context(), id) })
	if err != nil {
		s.fail(w, err, "webhook "+id)
		return
	}
	writeJSON(w, http.StatusOK, true)
}

func (s *Service) deliveries(w http.ResponseWriter, r *http.Request) {
	qs := r.URL.Query()
	q := store.DeliveryQuery{State: qs.Get("state"), SessionID: qs.Get("sessionID"), Target: qs.Get("webhookID"), Limit: 100}
	switch q.State {
	case "", store.DeliveryPending, store.DeliveryDelivered, store.DeliveryFailed:
	default:
		writeErr(w, http.StatusBadRequest, "BadRequest", "state: want pending, delivered or failed")
		return
	}
	if l := qs.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 1000 {
			writeErr(w, http.StatusBadRequest, "BadRequest", "limit: want 1 to 1000")
			return
		}
		q.Limit = n
	}
	if before := qs.Get("before"); before != "" {
		d, err := s.rd.Delivery(r.Context(), before)
		if err != nil {
			s.fail(w, err, "delivery "+before)
			return
		}
		q.BeforeSeq, q.BeforeID = d.Seq, d.ID
	}
	list, err := s.rd.Deliveries(r.Context(), q)
	if err != nil {
		s.fail(w, err, "")
		return
	}
	out := make([]DeliveryJSON, 0, len(list))
	for _, d := range list {
		out = append(out, deliveryOf(d))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Service) delivery(w http.ResponseWriter, r *http.Request) {
	d, err := s.rd.Delivery(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, err, "delivery "+r.PathValue("id"))
		return
	}
	writeJSON(w, http.StatusOK, deliveryOf(d))
}

func (s *Service) retry(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !s.Enabled() {
		writeErr(w, http.StatusBadRequest, "BadRequest", ErrOff.Error())
		return
	}
	err := s.st.Tx(r.Context(), func(tx store.Tx) error {
		wt := tx.(store.WebhookTx)
		if _, err := wt.Delivery(r.Context(), id); err != nil {
			return err
		}
		if err := wt.RetryDelivery(r.Context(), id, s.cfg.RetryFor); errors.Is(err, store.ErrNotFound) {
			return errNotFailed
		} else if err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		s.fail(w, err, "delivery "+id)
		return
	}
	s.poke()
	d, err := s.rd.Delivery(r.Context(), id)
	if err != nil {
		s.fail(w, err, "delivery "+id)
		return
	}
	writeJSON(w, http.StatusOK, deliveryOf(d))
}

var errNotFailed = errors.New("only a failed delivery can be retried")

// fail answers an error in opencode's v1 shape.
func (s *Service) fail(w http.ResponseWriter, err error, what string) {
	var ie *engine.InputError
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeErr(w, http.StatusNotFound, "NotFoundError", what+" not found")
	case errors.As(err, &ie):
		writeErr(w, http.StatusBadRequest, "BadRequest", ie.Msg)
	case errors.Is(err, errNotFailed):
		writeErr(w, http.StatusConflict, "ConflictError", err.Error())
	case errors.Is(err, store.ErrStorage), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		w.Header().Set("Retry-After", "5")
		writeErr(w, http.StatusServiceUnavailable, "StorageError", "the database is unavailable; nothing was changed, retry")
	default:
		s.lg.Error("webhook request failed", "err", err)
		writeErr(w, http.StatusInternalServerError, "UnknownError", "internal error")
	}
}

func writeErr(w http.ResponseWriter, status int, name, msg string) {
	writeJSON(w, status, map[string]any{"name": name, "data": map[string]string{"message": msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
