package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Webhooks records what one node's webhooks did (package webhook):
// deliveries sent and failed for good, attempts that failed and will be
// retried, events lost to retention before they were relayed, and the
// time from an event to its delivery; and, read from the store at each
// scrape, the deliveries pending and failed. A nil *Webhooks records
// nothing.
type Webhooks struct {
	sent, failed, retried, gaps prometheus.Counter
	latency                     prometheus.Histogram
}

// Deliveries counts the pending and the failed deliveries in the store.
type Deliveries func(ctx context.Context) (pending, failed int64, err error)

// NewWebhooks registers the webhooks' metrics with m (nil: they are made
// but served nowhere); counts is read at each scrape, bounded by timeout.
func NewWebhooks(m *Metrics, counts Deliveries, timeout time.Duration) *Webhooks {
	w := &Webhooks{
		sent: prometheus.NewCounter(prometheus.CounterOpts{Name: "agentd_webhook_sent_total",
			Help: "Webhook deliveries this node sent and the receiver accepted (2xx)."}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{Name: "agentd_webhook_failed_total",
			Help: "Webhook deliveries this node gave up on (retry time passed, or an address the operator refused)."}),
		retried: prometheus.NewCounter(prometheus.CounterOpts{Name: "agentd_webhook_attempt_errors_total",
			Help: "Webhook attempts this node made that failed and will be retried."}),
		gaps: prometheus.NewCounter(prometheus.CounterOpts{Name: "agentd_webhook_events_pruned_total",
			Help: "Events retention pruned before the relay read them (their webhooks were never derived)."}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "agentd_webhook_latency_seconds",
			Help:    "Time from the event (a run's end, an ask) to the receiver's 2xx, retries included.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 7200}}),
	}
	m.Register(w.sent, w.failed, w.retried, w.gaps, w.latency, &deliveryCollector{counts: counts, timeout: timeout,
		desc: prometheus.NewDesc("agentd_webhook_deliveries", "Webhook deliveries in the store, by state (pending, failed).",
			[]string{"state"}, nil)})
	return w
}

// Sent counts a delivery accepted d after its event.
func (w *Webhooks) Sent(d time.Duration) {
	if w != nil {
		w.sent.Inc()
		w.latency.Observe(d.Seconds())
	}
}

// Failed counts a delivery given up on.
func (w *Webhooks) Failed() {
	if w != nil {
		w.failed.Inc()
	}
}

// Retried counts a failed attempt that will be retried.
func (w *Webhooks) Retried() {
	if w != nil {
		w.retried.Inc()
	}
}

// Pruned counts n events the relay found pruned.
func (w *Webhooks) Pruned(n int64) {
	if w != nil {
		w.gaps.Add(float64(n))
	}
}

type deliveryCollector struct {
	counts  Deliveries
	timeout time.Duration
	desc    *prometheus.Desc
}

func (c *deliveryCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *deliveryCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	pending, failed, err := c.counts(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(pending), "pending")
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(failed), "failed")
}
