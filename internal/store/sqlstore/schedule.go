package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agentd/agentd/internal/store"
)

const scheduleColumns = `id, created_ms, spec, next_ms, pending, pending_expires_ms, last`

func scanSchedule(row interface{ Scan(...any) error }) (store.Schedule, error) {
	var s store.Schedule
	var spec string
	var pending, last sql.NullString
	err := row.Scan(&s.ID, &s.Created, &spec, &s.Next, &pending, &s.PendingExpires, &last)
	s.Spec = []byte(spec)
	if pending.Valid {
		s.Pending = []byte(pending.String)
	}
	if last.Valid {
		s.Last = []byte(last.String)
	}
	return s, err
}

func nullable(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// Schedule implements store.Reader.
func (r Reader) Schedule(ctx context.Context, id string) (store.Schedule, error) {
	s, err := scanSchedule(r.queryRow(ctx, `SELECT `+scheduleColumns+` FROM schedules WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return s, store.ErrNotFound
	}
	if err != nil {
		return s, fmt.Errorf("get schedule: %w", err)
	}
	return s, nil
}

// Schedules implements store.Reader.
func (r Reader) Schedules(ctx context.Context) ([]store.Schedule, error) {
	return r.schedules(ctx, `SELECT `+scheduleColumns+` FROM schedules ORDER BY created_ms, id`)
}

// DueSchedules implements store.Reader.
func (r Reader) DueSchedules(ctx context.Context, now int64, limit int) ([]store.Schedule, error) {
	return r.schedules(ctx, `SELECT `+scheduleColumns+` FROM schedules
		WHERE (pending IS NULL AND next_ms > 0 AND next_ms <= ?) OR (pending IS NOT NULL AND pending_expires_ms < ?)
		ORDER BY next_ms, id LIMIT ?`, now, now, limit)
}

func (r Reader) schedules(ctx context.Context, q string, args ...any) ([]store.Schedule, error) {
	rows, err := r.query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	defer rows.Close()
	var out []store.Schedule
	for rows.Next() {
		s, err := scanSchedule(rows)
		if err != nil {
			return nil, fmt.Errorf("scan schedule: %w", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	return out, nil
}

// InsertSchedule implements store.Tx.
func (t *Tx) InsertSchedule(ctx context.Context, s store.Schedule) error {
	return t.insert(ctx, "schedule", `INSERT INTO schedules (`+scheduleColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		s.ID, s.Created, string(s.Spec), s.Next, nullable(s.Pending), s.PendingExpires, nullable(s.Last))
}

// DeleteSchedule implements store.Tx.
func (t *Tx) DeleteSchedule(ctx context.Context, id string) error {
	return t.update(ctx, "schedule", `DELETE FROM schedules WHERE id = ?`, id)
}

// ClaimTick implements store.Tx. The condition on next_ms is what makes
// the claim exclusive: on PostgreSQL a second UPDATE of the row waits for
// the first to commit and then finds next_ms moved, on SQLite the writer
// is single.
func (t *Tx) ClaimTick(ctx context.Context, id string, due, next int64, pending []byte, expires int64) error {
	return t.update(ctx, "schedule", `UPDATE schedules SET next_ms = ?, pending = ?, pending_expires_ms = ?
		WHERE id = ? AND next_ms = ? AND pending IS NULL`, next, string(pending), expires, id, due)
}

// TakePending implements store.Tx.
func (t *Tx) TakePending(ctx context.Context, id string, was, expires int64) error {
	return t.update(ctx, "schedule", `UPDATE schedules SET pending_expires_ms = ?
		WHERE id = ? AND pending IS NOT NULL AND pending_expires_ms = ?`, expires, id, was)
}

// FinishTick implements store.Tx.
func (t *Tx) FinishTick(ctx context.Context, id string, claim int64, last []byte) error {
	return t.update(ctx, "schedule", `UPDATE schedules SET pending = NULL, pending_expires_ms = 0, last = ?
		WHERE id = ? AND pending IS NOT NULL AND pending_expires_ms = ?`, string(last), id, claim)
}
