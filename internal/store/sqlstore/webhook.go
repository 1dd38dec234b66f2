package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/agentd/agentd/internal/store"
)

var (
	_ store.WebhookReader = Reader{}
	_ store.WebhookTx     = (*Tx)(nil)
)

// The webhooks' SQL (see store.WebhookTx). Two things differ between the
// dialects, and PostgreSQL is the one that numbers its placeholders:
// there nodes share the deliveries, so lease and retry times come from
// the database's one clock and claims skip the rows another node holds;
// SQLite has one process, one writer and the machine's clock.

// nowMS is the database's clock in epoch milliseconds.
func (d *Dialect) nowMS() string {
	if d.Dollar {
		return `(extract(epoch from clock_timestamp()) * 1000)::bigint`
	}
	return `CAST(unixepoch('subsec') * 1000 AS INTEGER)`
}

// lockClause locks the rows a claim selects, skipping those another
// transaction holds, where several nodes claim at once.
func (d *Dialect) lockClause(skip bool) string {
	switch {
	case !d.Dollar:
		return ""
	case skip:
		return " FOR UPDATE SKIP LOCKED"
	}
	return " FOR UPDATE"
}

// firstInLine holds for a pending delivery d that no earlier pending
// delivery to the same URL about the same session precedes.
const firstInLine = `NOT EXISTS (SELECT 1 FROM webhook_deliveries e WHERE e.state = 'pending' AND e.url = d.url
	AND e.session_id = d.session_id AND (e.seq < d.seq OR (e.seq = d.seq AND e.id < d.id)))`

const deliveryCols = `id, seq, target, url, session_id, type, state, attempts, last_status, last_error,
	created_ms, next_ms, deadline_ms, ended_ms, lease_owner, lease_expires_ms`

func scanDelivery(row interface{ Scan(...any) error }, body bool) (store.Delivery, error) {
	var d store.Delivery
	dest := []any{&d.ID, &d.Seq, &d.Target, &d.URL, &d.SessionID, &d.Type, &d.State, &d.Attempts, &d.LastStatus,
		&d.LastError, &d.Created, &d.Next, &d.Deadline, &d.Ended, &d.LeaseOwner, &d.LeaseExpires}
	var b string
	if body {
		dest = append(dest, &b)
	}
	err := row.Scan(dest...)
	if body {
		d.Body = []byte(b)
	}
	return d, err
}

func scanDeliveries(rows *sql.Rows) ([]store.Delivery, error) {
	defer rows.Close()
	var out []store.Delivery
	for rows.Next() {
		d, err := scanDelivery(rows, false)
		if err != nil {
			return nil, fmt.Errorf("scan deliveries: %w", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list deliveries: %w", err)
	}
	return out, nil
}

// Webhooks implements store.WebhookReader.
func (r Reader) Webhooks(ctx context.Context, sessionID string) ([]store.Webhook, error) {
	q := `SELECT id, url, events, COALESCE(session_id, ''), created_ms FROM webhooks`
	var args []any
	if sessionID != "" {
		q += ` WHERE session_id = ?`
		args = append(args, sessionID)
	}
	rows, err := r.query(ctx, q+` ORDER BY created_ms, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	defer rows.Close()
	var out []store.Webhook
	for rows.Next() {
		w, err := scanWebhook(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	return out, nil
}

func scanWebhook(row interface{ Scan(...any) error }) (store.Webhook, error) {
	var w store.Webhook
	var events string
	if err := row.Scan(&w.ID, &w.URL, &events, &w.SessionID, &w.Created); err != nil {
		return w, err
	}
	if err := json.Unmarshal([]byte(events), &w.Events); err != nil {
		return w, fmt.Errorf("decode webhook %s: %w", w.ID, err)
	}
	return w, nil
}

// Webhook implements store.WebhookReader.
func (r Reader) Webhook(ctx context.Context, id string) (store.Webhook, error) {
	w, err := scanWebhook(r.queryRow(ctx, `SELECT id, url, events, COALESCE(session_id, ''), created_ms FROM webhooks WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return w, store.ErrNotFound
	}
	if err != nil {
		return w, fmt.Errorf("get webhook: %w", err)
	}
	return w, nil
}

// Deliveries implements store.WebhookReader.
func (r Reader) Deliveries(ctx context.Context, q store.DeliveryQuery) ([]store.Delivery, error) {
	where, args := `1 = 1`, []any{}
	for _, f := range []struct{ col, v string }{{"state", q.State}, {"session_id", q.SessionID}, {"target", q.Target}} {
		if f.v != "" {
			where += ` AND ` + f.col + ` = ?`
			args = append(args, f.v)
		}
	}
	if q.BeforeID != "" {
		where += ` AND (seq < ? OR (seq = ? AND id < ?))`
		args = append(args, q.BeforeSeq, q.BeforeSeq, q.BeforeID)
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := r.query(ctx, `SELECT `+deliveryCols+` FROM webhook_deliveries WHERE `+where+
		` ORDER BY seq DESC, id DESC LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("list deliveries: %w", err)
	}
	return scanDeliveries(rows)
}

// Delivery implements store.WebhookReader.
func (r Reader) Delivery(ctx context.Context, id string) (store.Delivery, error) {
	d, err := scanDelivery(r.queryRow(ctx, `SELECT `+deliveryCols+`, body FROM webhook_deliveries WHERE id = ?`, id), true)
	if errors.Is(err, sql.ErrNoRows) {
		return d, store.ErrNotFound
	}
	if err != nil {
		return d, fmt.Errorf("get delivery: %w", err)
	}
	return d, nil
}

// DeliveryCounts implements store.WebhookReader.
func (r Reader) DeliveryCounts(ctx context.Context) (pending, failed int64, err error) {
	err = r.queryRow(ctx, `SELECT (SELECT COUNT(*) FROM webhook_deliveries WHERE state = 'pending'),
		(SELECT COUNT(*) FROM webhook_deliveries WHERE state = 'failed')`).Scan(&pending, &failed)
	if err != nil {
		return 0, 0, fmt.Errorf("count deliveries: %w", err)
	}
	return pending, failed, nil
}

// NextDelivery implements store.WebhookReader.
func (r Reader) NextDelivery(ctx context.Context) (time.Duration, bool, error) {
	var wait sql.NullInt64
	err := r.queryRow(ctx, `SELECT MIN(CASE WHEN d.lease_expires_ms > d.next_ms THEN d.lease_expires_ms ELSE d.next_ms END) - `+
		r.D.nowMS()+` FROM webhook_deliveries d WHERE d.state = 'pending' AND `+firstInLine).Scan(&wait)
	if err != nil {
		return 0, false, fmt.Errorf("next delivery: %w", err)
	}
	return time.Duration(wait.Int64) * time.Millisecond, wait.Valid, nil
}

// WebhookCursor implements store.WebhookReader.
func (r Reader) WebhookCursor(ctx context.Context) (int64, error) {
	var seq int64
	if err := r.queryRow(ctx, `SELECT seq FROM webhook_cursor`).Scan(&seq); err != nil {
		return 0, fmt.Errorf("read webhook cursor: %w", err)
	}
	return seq, nil
}

// sessionExists refuses a write about a session that does not exist with
// ErrNotFound rather than a foreign key's error.
func (t *Tx) sessionExists(ctx context.Context, id string) error {
	var one int
	err := t.queryRow(ctx, `SELECT 1 FROM sessions WHERE id = ?`, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("session %s: %w", id, store.ErrNotFound)
	}
	return err
}

// PutWebhook implements store.WebhookTx.
func (t *Tx) PutWebhook(ctx context.Context, w store.Webhook) error {
	events, err := json.Marshal(w.Events)
	if err != nil {
		return err
	}
	if w.Events == nil {
		events = []byte("[]")
	}
	var session any
	if w.SessionID != "" {
		if err := t.sessionExists(ctx, w.SessionID); err != nil {
			return err
		}
		session = w.SessionID
	}
	return t.insert(ctx, "webhook", `INSERT INTO webhooks (id, url, events, session_id, created_ms) VALUES (?, ?, ?, ?, ?)`,
		w.ID, w.URL, string(events), session, w.Created)
}

// DeleteWebhook implements store.WebhookTx.
func (t *Tx) DeleteWebhook(ctx context.Context, id string) error {
	return t.update(ctx, "webhook", `DELETE FROM webhooks WHERE id = ?`, id)
}

// PutCallback implements store.WebhookTx.
func (t *Tx) PutCallback(ctx context.Context, c store.Callback) error {
	if err := t.sessionExists(ctx, c.SessionID); err != nil {
		return err
	}
	_, err := t.exec(ctx, `INSERT INTO webhook_callbacks (session_id, message_id, url, created_ms) VALUES (?, ?, ?, ?)
		ON CONFLICT (session_id, message_id) DO UPDATE SET url = excluded.url`, c.SessionID, c.MessageID, c.URL, c.Created)
	if err != nil {
		return fmt.Errorf("put callback: %w", err)
	}
	return nil
}

// DeleteCallback implements store.WebhookTx.
func (t *Tx) DeleteCallback(ctx context.Context, sessionID, messageID string) error {
	if _, err := t.exec(ctx, `DELETE FROM webhook_callbacks WHERE session_id = ? AND message_id = ?
		AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.session_id = webhook_callbacks.session_id AND m.id = webhook_callbacks.message_id)`,
		sessionID, messageID); err != nil {
		return fmt.Errorf("delete callback: %w", err)
	}
	return nil
}

// TakeRunCallbacks implements store.WebhookTx.
func (t *Tx) TakeRunCallbacks(ctx context.Context, runID string) ([]string, error) {
	rows, err := t.query(ctx, `SELECT DISTINCT c.url FROM webhook_callbacks c JOIN messages m
		ON m.session_id = c.session_id AND m.id = c.message_id WHERE m.run_id = ? AND m.role = 'user' ORDER BY c.url`, runID)
	if err != nil {
		return nil, fmt.Errorf("run callbacks: %w", err)
	}
	defer rows.Close()
	var urls []string
	for rows.Next() {
		var u string
		if err := rows.Scan(&u); err != nil {
			return nil, fmt.Errorf("scan run callbacks: %w", err)
		}
		urls = append(urls, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("run callbacks: %w", err)
	}
	if len(urls) == 0 {
		return nil, nil
	}
	if _, err := t.exec(ctx, `DELETE FROM webhook_callbacks WHERE EXISTS (SELECT 1 FROM messages m
		WHERE m.session_id = webhook_callbacks.session_id AND m.id = webhook_callbacks.message_id AND m.run_id = ?)`, runID); err != nil {
		return nil, fmt.Errorf("forget run callbacks: %w", err)
	}
	return urls, nil
}

// LockWebhookCursor implements store.WebhookTx.
func (t *Tx) LockWebhookCursor(ctx context.Context) (int64, error) {
	var seq int64
	if err := t.queryRow(ctx, `SELECT seq FROM webhook_cursor`+t.D.lockClause(false)).Scan(&seq); err != nil {
		return 0, fmt.Errorf("lock webhook cursor: %w", err)
	}
	return seq, nil
}

// SetWebhookCursor implements store.WebhookTx.
func (t *Tx) SetWebhookCursor(ctx context.Context, seq int64) error {
	if _, err := t.exec(ctx, `UPDATE webhook_cursor SET seq = ?`, seq); err != nil {
		return fmt.Errorf("move webhook cursor: %w", err)
	}
	return nil
}

// InsertDelivery implements store.WebhookTx.
func (t *Tx) InsertDelivery(ctx context.Context, d store.Delivery, retryFor time.Duration) error {
	now := t.D.nowMS()
	_, err := t.exec(ctx, `INSERT INTO webhook_deliveries (id, seq, target, url, session_id, type, body, state, created_ms, next_ms, deadline_ms)
		VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', `+now+`, `+now+`, `+now+` + ?) ON CONFLICT (seq, target, url) DO NOTHING`,
		d.ID, d.Seq, d.Target, d.URL, d.SessionID, d.Type, string(d.Body), retryFor.Milliseconds())
	if err != nil {
		return fmt.Errorf("insert delivery: %w", err)
	}
	return nil
}

// ClaimDeliveries implements store.WebhookTx.
func (t *Tx) ClaimDeliveries(ctx context.Context, owner string, lease time.Duration, limit int) ([]store.Delivery, error) {
	now := t.D.nowMS()
	rows, err := t.query(ctx, `UPDATE webhook_deliveries SET lease_owner = ?, lease_expires_ms = `+now+` + ?, attempts = attempts + 1
		WHERE id IN (SELECT d.id FROM webhook_deliveries d WHERE d.state = 'pending' AND d.next_ms <= `+now+`
			AND d.lease_expires_ms <= `+now+` AND `+firstInLine+` ORDER BY d.seq, d.id LIMIT ?`+t.D.lockClause(true)+`)
		RETURNING `+deliveryCols+`, body`, owner, lease.Milliseconds(), limit)
	if err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	defer rows.Close()
	var out []store.Delivery
	for rows.Next() {
		d, err := scanDelivery(rows, true)
		if err != nil {
			return nil, fmt.Errorf("scan claimed delivery: %w", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Seq < out[j].Seq || out[i].Seq == out[j].Seq && out[i].ID < out[j].ID
	})
	return out, nil
}

// EndAttempt implements store.WebhookTx.
func (t *Tx) EndAttempt(ctx context.Context, a store.Attempt) (string, error) {
	now := t.D.nowMS()
	const mine = ` WHERE id = ? AND lease_owner = ? AND attempts = ? AND state = 'pending' RETURNING state`
	var row *sql.Row
	switch {
	case a.OK:
		row = t.queryRow(ctx, `UPDATE webhook_deliveries SET state = 'delivered', ended_ms = `+now+`,
			lease_owner = '', lease_expires_ms = 0`+mine, a.ID, a.Owner, a.Attempt)
	case a.Final:
		row = t.queryRow(ctx, `UPDATE webhook_deliveries SET state = 'failed', ended_ms = `+now+`, last_status = ?, last_error = ?,
			lease_owner = '', lease_expires_ms = 0`+mine, a.Status, a.Error, a.ID, a.Owner, a.Attempt)
	default:
		// Past its deadline, a delivery fails rather than waits for a try
		// it may not make.
		retry := a.Retry.Milliseconds()
		row = t.queryRow(ctx, `UPDATE webhook_deliveries SET
			state = CASE WHEN `+now+` + ? > deadline_ms THEN 'failed' ELSE 'pending' END,
			ended_ms = CASE WHEN `+now+` + ? > deadline_ms THEN `+now+` ELSE 0 END,
			next_ms = `+now+` + ?, last_status = ?, last_error = ?, lease_owner = '', lease_expires_ms = 0`+mine,
			retry, retry, retry, a.Status, a.Error, a.ID, a.Owner, a.Attempt)
	}
	var state string
	err := row.Scan(&state)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("record delivery attempt: %w", err)
	}
	return state, nil
}

// RetryDelivery implements store.WebhookTx.
func (t *Tx) RetryDelivery(ctx context.Context, id string, retryFor time.Duration) error {
	now := t.D.nowMS()
	return t.update(ctx, "delivery", `UPDATE webhook_deliveries SET state = 'pending', next_ms = `+now+`,
		deadline_ms = `+now+` + ?, ended_ms = 0, lease_owner = '', lease_expires_ms = 0 WHERE id = ? AND state = 'failed'`,
		retryFor.Milliseconds(), id)
}

// ReleaseDeliveries implements store.WebhookTx.
func (t *Tx) ReleaseDeliveries(ctx context.Context, owner string) error {
	if _, err := t.exec(ctx, `UPDATE webhook_deliveries SET lease_owner = '', lease_expires_ms = 0
		WHERE lease_owner = ? AND state = 'pending'`, owner); err != nil {
		return fmt.Errorf("release deliveries: %w", err)
	}
	return nil
}

// PruneDeliveries implements store.WebhookTx.
func (t *Tx) PruneDeliveries(ctx context.Context, endedBefore int64) (int64, error) {
	res, err := t.exec(ctx, `DELETE FROM webhook_deliveries WHERE state <> 'pending' AND ended_ms < ?`, endedBefore)
	if err != nil {
		return 0, fmt.Errorf("prune deliveries: %w", err)
	}
	return res.RowsAffected()
}
