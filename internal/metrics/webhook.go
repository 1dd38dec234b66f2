package metrics

import (
	"context"
	"time"
)

// Webhooks records what one node's webhooks did (package webhook):
// deliveries sent and failed for good, attempts that failed and will be
// retried, events lost to retention before they were relayed, and the
// time from an event to its delivery; and, read from the store at each
// scrape, the deliveries pending and failed. A nil *Webhooks records
// nothing.
type Webhooks struct {
	sent, failed, retried, gaps *series
	latency                     *family
}

// Deliveries counts the pending and the failed deliveries in the store.
type Deliveries func(ctx context.Context) (pending, failed int64, err error)

// NewWebhooks registers the webhooks' metrics with m (nil: they are made
// but served nowhere); counts is read at each scrape, bounded by timeout.
func NewWebhooks(m *Metrics, counts Deliveries, timeout time.Duration) *Webhooks {
	sent := newFamily("agentd_webhook_sent_total", "Webhook deliveries this node sent and the receiver accepted (2xx).", counterKind, nil)
	failed := newFamily("agentd_webhook_failed_total",
		"Webhook deliveries this node gave up on (retry time passed, or an address the operator refused).", counterKind, nil)
	retried := newFamily("agentd_webhook_attempt_errors_total", "Webhook attempts this node made that failed and will be retried.",
		counterKind, nil)
	gaps := newFamily("agentd_webhook_events_pruned_total",
		"Events retention pruned before the relay read them (their webhooks were never derived).", counterKind, nil)
	latency := newFamily("agentd_webhook_latency_seconds",
		"Time from the event (a run's end, an ask) to the receiver's 2xx, retries included.", histogramKind,
		[]float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 7200})
	w := &Webhooks{sent: sent.with(), failed: failed.with(), retried: retried.with(), gaps: gaps.with(), latency: latency}
	latency.with()
	if m != nil {
		m.reg.add(sent, failed, retried, gaps, latency)
		m.reg.addCollector(&deliveryCollector{counts: counts, timeout: timeout})
	}
	return w
}

// Sent counts a delivery accepted d after its event.
func (w *Webhooks) Sent(d time.Duration) {
	if w != nil {
		w.sent.add(1)
		w.latency.observe(d.Seconds())
	}
}

// Failed counts a delivery given up on.
func (w *Webhooks) Failed() {
	if w != nil {
		w.failed.add(1)
	}
}

// Retried counts a failed attempt that will be retried.
func (w *Webhooks) Retried() {
	if w != nil {
		w.retried.add(1)
	}
}

// Pruned counts n events the relay found pruned.
func (w *Webhooks) Pruned(n int64) {
	if w != nil {
		w.gaps.add(float64(n))
	}
}

type deliveryCollector struct {
	counts  Deliveries
	timeout time.Duration
}

// Collect reads the deliveries' counts; none when the store fails.
func (c *deliveryCollector) Collect() []snapshot {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	pending, failed, err := c.counts(ctx)
	if err != nil {
		return nil
	}
	return []snapshot{constFamily("agentd_webhook_deliveries", "Webhook deliveries in the store, by state (pending, failed).",
		gaugeKind, []string{"state"}, sample{values: []string{"pending"}, value: float64(pending)},
		sample{values: []string{"failed"}, value: float64(failed)})}
}
