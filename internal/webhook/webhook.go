// Package webhook sends signed HTTP callbacks when runs end and asks wait:
// to the callbackUrl a prompt carries, and to subscriptions (per session
// or server-wide).
//
// The event log is the outbox. A run's end, its idle part and its events
// are one transaction (the engine's finish), so nothing more needs writing
// there: the relay reads the log after its durable cursor (from the
// event hub's memory, or the store), derives the deliveries each relevant
// event calls for and writes them together with its cursor's move, in a
// transaction of its own. A crash before that transaction leaves the
// cursor behind and the events are relayed again; a delivery is unique by
// its event, subscription and URL, so nothing is derived twice, and nodes
// sharing a database relay the one log without duplicates.
//
// The dispatcher claims due deliveries with a lease (on PostgreSQL FOR
// UPDATE SKIP LOCKED, on the database's clock), so one node sends each;
// a node that dies leaves its leases to expire and another takes them
// over. Each attempt is signed (X-Agentd-Signature), carries the
// delivery's id (X-Agentd-Delivery, the same on every attempt) and goes
// through the address check webfetch uses (package netguard). Failures
// are retried with exponential backoff and jitter until RetryFor has
// passed, then the delivery is failed, visible at GET /webhook/delivery.
//
// Guarantees: every delivery is sent at least once (a crash between a
// receiver's 2xx and its record sends it again, with the same id), and
// in order per URL and session: a delivery is not attempted while an
// earlier one to the same URL about the same session is pending; one that
// failed for good no longer holds the line.
package webhook

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/metrics"
	"github.com/agentd/agentd/internal/netguard"
	"github.com/agentd/agentd/internal/store"
)

// Webhook event types. Receivers should ignore types they do not know:
// more may be added.
const (
	// EventRunEnded: a run ended (succeeded, failed or interrupted), with
	// the run, its session and its last answer.
	EventRunEnded = "run.ended"
	// EventAskWaiting: the model asked for a permission or asked the user
	// a question, and the run waits for the answer.
	EventAskWaiting = "ask.waiting"
)

// EventTypes are the types a subscription may name.
var EventTypes = []string{EventRunEnded, EventAskWaiting}

// Config configures the webhooks of a node.
type Config struct {
	// Secret signs every delivery; empty turns webhooks off (nothing is
	// relayed or sent, and callbacks and subscriptions are refused).
	Secret string
	// Allow opens addresses the address check refuses (this machine,
	// private networks): agentd.webhooks.allow.
	Allow []netip.Prefix
	// RetryFor bounds how long a delivery is retried (default 24 h);
	// Timeout one attempt (default 10 s).
	RetryFor time.Duration
	Timeout  time.Duration
	// Backoff is the wait after the first failure (default 1 s), doubled
	// after each further one up to MaxBackoff (default 10 min), with
	// jitter.
	Backoff, MaxBackoff time.Duration
	// Workers bounds the deliveries a node sends at once (default 8).
	Workers int
	// Keep is how long ended deliveries stay visible (default 7 days).
	Keep time.Duration
	// Poll bounds how long the dispatcher sleeps without news (default
	// 2 s): it also wakes when the relay adds deliveries, a send ends, or
	// the next retry or lease expiry is due.
	Poll time.Duration
	// Node owns the leases; Version goes into the User-Agent.
	Node, Version string
	Logger        *slog.Logger
	// Metrics counts what is sent (nil: nothing is counted).
	Metrics *metrics.Webhooks
}

func (c *Config) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.RetryFor, 24*time.Hour)
	def(&c.Timeout, 10*time.Second)
	def(&c.Backoff, time.Second)
	def(&c.MaxBackoff, 10*time.Minute)
	def(&c.Keep, 7*24*time.Hour)
	def(&c.Poll, 2*time.Second)
	if c.Workers <= 0 {
		c.Workers = 8
	}
	if c.Node == "" {
		c.Node = "local"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Log is the event log as the relay reads it: events.Hub.
type Log interface {
	// Head returns the last seq committed and a channel closed when it
	// moves.
	Head() (int64, <-chan struct{})
	// Read returns up to max events after a seq, and the seq read
	// through; *events.GapError when retention pruned what follows after.
	Read(ctx context.Context, after int64, sessionID string, max int) ([]core.Event, int64, error)
}

// Service is a node's webhooks: the relay, the dispatcher, the callbacks
// prompts register and the HTTP routes.
type Service struct {
	cfg    Config
	st     store.Store
	rd     store.WebhookReader
	log    Log
	lg     *slog.Logger
	guard  netguard.Guard
	client *http.Client

	kick   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	start  sync.Once
	stop   sync.Once
}

// ErrOff is returned for callbacks and subscriptions while webhooks are
// off.
var ErrOff = errors.New("webhooks are off on this server: the operator sets agentd.webhooks.secret")

// New builds the service over a store whose driver keeps the webhooks'
// state (rd is its read side; writes go through st.Tx). A secret too
// short to sign with is refused.
func New(st store.Store, rd store.WebhookReader, log Log, cfg Config) (*Service, error) {
	cfg.defaults()
	if cfg.Secret != "" {
		if err := CheckSecret(cfg.Secret); err != nil {
			return nil, err
		}
	}
	s := &Service{cfg: cfg, st: st, rd: rd, log: log, lg: cfg.Logger.With("component", "webhook"),
		guard: netguard.Guard{Allow: cfg.Allow, Key: "agentd.webhooks.allow"}, kick: make(chan struct{}, 1)}
	s.client = s.newClient()
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// Enabled reports whether the service sends (a secret is configured).
func (s *Service) Enabled() bool { return s.cfg.Secret != "" }

// Start starts the relay and the dispatcher (nothing when webhooks are
// off). It returns once the relay's cursor is read and leases a previous
// process of this node left are released, so that its pending deliveries
// go on at once.
func (s *Service) Start(ctx context.Context) error {
	if !s.Enabled() {
		return nil
	}
	var err error
	s.start.Do(func() {
		var cursor int64
		if cursor, err = s.rd.WebhookCursor(ctx); err != nil {
			return
		}
		err = s.st.Tx(ctx, func(tx store.Tx) error {
			return tx.(store.WebhookTx).ReleaseDeliveries(ctx, s.cfg.Node)
		})
		if err != nil {
			return
		}
		s.wg.Add(2)
		go s.relayLoop(cursor)
		go s.dispatchLoop()
	})
	return err
}

// Stop ends the relay and the dispatcher and waits for them; sends in
// flight are cut and their leases released (they are sent again, with
// the same delivery id). It is idempotent and safe before Start.
func (s *Service) Stop() {
	if s == nil {
		return
	}
	s.stop.Do(func() {
		s.cancel()
		s.wg.Wait()
		if !s.Enabled() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := s.st.Tx(ctx, func(tx store.Tx) error {
			return tx.(store.WebhookTx).ReleaseDeliveries(ctx, s.cfg.Node)
		})
		if err != nil {
			s.lg.Warn("release webhook deliveries", "err", err)
		}
		s.client.CloseIdleConnections()
	})
}

// poke wakes the dispatcher.
func (s *Service) poke() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// sleep waits d or until the service stops; false when it stopped.
func (s *Service) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
