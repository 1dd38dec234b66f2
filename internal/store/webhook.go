package store

import (
	"context"
	"time"
)

// The webhooks' durable state (package webhook): subscriptions, the
// callback URLs prompts carry, the deliveries derived from the event log
// and the relay's cursor in that log. Both SQL drivers implement these
// interfaces beside Reader and Tx (their Tx, and their Store's read side),
// so the engine and the core interfaces know nothing of them.

// Webhook is a subscription: the events of one session (SessionID) or of
// every session ("") sent to URL. Events lists the webhook event types it
// wants; empty means all.
type Webhook struct {
	ID        string
	URL       string
	Events    []string
	SessionID string
	Created   int64
}

// Callback is a prompt's callbackUrl: the run that answers the message is
// reported to URL when it ends.
type Callback struct {
	SessionID string
	MessageID string
	URL       string
	Created   int64
}

// Delivery states.
const (
	DeliveryPending   = "pending"
	DeliveryDelivered = "delivered"
	DeliveryFailed    = "failed"
)

// Delivery is one webhook event to send to one URL. Seq is the event
// log's record it was derived from; Target the subscription's id, or ""
// for a prompt's callback. (Seq, Target, URL) is unique: a delivery is
// derived once however many nodes relay the log. Times are epoch ms on
// the database's clock.
type Delivery struct {
	ID        string
	Seq       int64
	Target    string
	URL       string
	SessionID string
	Type      string
	Body      []byte
	State     string
	Attempts  int
	// LastStatus and LastError describe the last failed attempt (0 and
	// "" when none failed).
	LastStatus int
	LastError  string
	Created    int64
	Next       int64
	Deadline   int64
	Ended      int64
	// LeaseOwner is the node sending it now (while LeaseExpires is
	// ahead).
	LeaseOwner   string
	LeaseExpires int64
}

// DeliveryQuery selects deliveries for listing, newest first.
type DeliveryQuery struct {
	State     string
	SessionID string
	Target    string
	// Before, when set, continues a list after the delivery of that seq
	// and id (the last one of the previous page).
	BeforeSeq int64
	BeforeID  string
	Limit     int
}

// Attempt is the outcome of one try at a delivery claimed with the given
// attempt count by owner.
type Attempt struct {
	ID      string
	Owner   string
	Attempt int
	// OK: the receiver answered 2xx. Otherwise Status (0: no answer) and
	// Error say why, and Retry is the wait before the next try, unless
	// Final: it will never succeed (an address the operator refused).
	OK     bool
	Status int
	Error  string
	Retry  time.Duration
	Final  bool
}

// WebhookReader reads the webhooks' state.
type WebhookReader interface {
	// Webhooks lists subscriptions, oldest first: those of one session
	// when sessionID is set, else all.
	Webhooks(ctx context.Context, sessionID string) ([]Webhook, error)
	// Webhook returns one subscription or ErrNotFound.
	Webhook(ctx context.Context, id string) (Webhook, error)
	// Deliveries lists deliveries, newest first.
	Deliveries(ctx context.Context, q DeliveryQuery) ([]Delivery, error)
	// Delivery returns one delivery with its body or ErrNotFound.
	Delivery(ctx context.Context, id string) (Delivery, error)
	// DeliveryCounts counts the pending and the failed deliveries.
	DeliveryCounts(ctx context.Context) (pending, failed int64, err error)
	// NextDelivery returns how long until a pending delivery that is
	// first in its line (URL and session) may be claimed (0 or less: now);
	// ok is false when none is pending.
	NextDelivery(ctx context.Context) (wait time.Duration, ok bool, err error)
	// WebhookCursor is the seq up to which the event log has been relayed
	// into deliveries.
	WebhookCursor(ctx context.Context) (int64, error)
}

// WebhookTx writes the webhooks' state inside a store transaction.
type WebhookTx interface {
	WebhookReader
	// PutWebhook adds a subscription; ErrNotFound when it names a
	// session that does not exist.
	PutWebhook(ctx context.Context, w Webhook) error
	// DeleteWebhook removes a subscription; its deliveries stay.
	DeleteWebhook(ctx context.Context, id string) error
	// PutCallback records (or replaces) a message's callback; ErrNotFound
	// when the session does not exist.
	PutCallback(ctx context.Context, c Callback) error
	// DeleteCallback forgets the callback of a message that was never
	// admitted (a refused prompt); an admitted message's stays.
	DeleteCallback(ctx context.Context, sessionID, messageID string) error
	// TakeRunCallbacks returns the callback URLs of the run's user
	// messages and forgets them: a run ends once.
	TakeRunCallbacks(ctx context.Context, runID string) ([]string, error)
	// LockWebhookCursor returns the relay's cursor, locked until commit
	// where nodes share it.
	LockWebhookCursor(ctx context.Context) (int64, error)
	// SetWebhookCursor moves the relay's cursor.
	SetWebhookCursor(ctx context.Context, seq int64) error
	// InsertDelivery adds a pending delivery due now, to be tried until
	// retryFor has passed; nothing when one of the same seq, target and
	// URL exists.
	InsertDelivery(ctx context.Context, d Delivery, retryFor time.Duration) error
	// ClaimDeliveries takes up to limit pending deliveries that are due,
	// not held by a live lease, and first in their line (no earlier
	// pending delivery to the same URL about the same session), for owner
	// until lease has passed, counting an attempt on each.
	ClaimDeliveries(ctx context.Context, owner string, lease time.Duration, limit int) ([]Delivery, error)
	// EndAttempt records an attempt's outcome, when the delivery is still
	// owner's at that attempt count, and returns the delivery's state
	// ("" when it is not: another node took it over). A failed attempt
	// makes the delivery due again after a.Retry, or failed when that
	// would pass its deadline or a.Final.
	EndAttempt(ctx context.Context, a Attempt) (string, error)
	// RetryDelivery makes a failed delivery pending again, due now, with
	// retryFor more to succeed; ErrNotFound when it is not failed.
	RetryDelivery(ctx context.Context, id string, retryFor time.Duration) error
	// ReleaseDeliveries gives up owner's leases at once.
	ReleaseDeliveries(ctx context.Context, owner string) error
	// PruneDeliveries deletes the deliveries that ended before the given
	// time (epoch ms).
	PruneDeliveries(ctx context.Context, endedBefore int64) (int64, error)
}
