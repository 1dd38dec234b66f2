package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agentd/agentd/internal/store"
)

const revertColumns = `session_id, id, owner, expires_ms, data`

func scanRevert(row interface{ Scan(...any) error }) (store.RevertJournal, error) {
	var j store.RevertJournal
	var data string
	err := row.Scan(&j.SessionID, &j.ID, &j.Owner, &j.Expires, &data)
	j.Data = []byte(data)
	return j, err
}

// RevertJournal implements store.Reader.
func (r Reader) RevertJournal(ctx context.Context, sessionID string) (store.RevertJournal, error) {
	j, err := scanRevert(r.queryRow(ctx, `SELECT `+revertColumns+` FROM reverts WHERE session_id = ?`, sessionID))
	if errors.Is(err, sql.ErrNoRows) {
		return j, store.ErrNotFound
	}
	if err != nil {
		return j, fmt.Errorf("get revert journal: %w", err)
	}
	return j, nil
}

// RevertJournals implements store.Reader.
func (r Reader) RevertJournals(ctx context.Context, expiresBefore int64) ([]store.RevertJournal, error) {
	rows, err := r.query(ctx, `SELECT `+revertColumns+` FROM reverts WHERE expires_ms < ? ORDER BY expires_ms, session_id`, expiresBefore)
	if err != nil {
		return nil, fmt.Errorf("list revert journals: %w", err)
	}
	defer rows.Close()
	var out []store.RevertJournal
	for rows.Next() {
		j, err := scanRevert(rows)
		if err != nil {
			return nil, fmt.Errorf("scan revert journal: %w", err)
		}
		out = append(out, j)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list revert journals: %w", err)
	}
	return out, nil
}

// PutRevertJournal implements store.Tx.
func (t *Tx) PutRevertJournal(ctx context.Context, j store.RevertJournal) error {
	return t.insert(ctx, "revert journal", `INSERT INTO reverts (`+revertColumns+`) VALUES (?, ?, ?, ?, ?)`,
		j.SessionID, j.ID, j.Owner, j.Expires, string(j.Data))
}

// TakeRevertJournal implements store.Tx.
func (t *Tx) TakeRevertJournal(ctx context.Context, sessionID, id, owner string, expires int64) error {
	return t.update(ctx, "revert journal", `UPDATE reverts SET owner = ?, expires_ms = ? WHERE session_id = ? AND id = ?`,
		owner, expires, sessionID, id)
}

// DeleteRevertJournal implements store.Tx.
func (t *Tx) DeleteRevertJournal(ctx context.Context, sessionID, id string) error {
	return t.update(ctx, "revert journal", `DELETE FROM reverts WHERE session_id = ? AND id = ?`, sessionID, id)
}
