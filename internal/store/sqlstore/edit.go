package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentd/agentd/internal/store"
)

// A message or part a client deleted, and the former version of a part a
// client changed, stay as tombstones marked "delete@N" or "edit@N", where
// N is the highest message position of the session when it happened. A
// view of the history through message M (the engine keeps one per
// session, taken while M existed) may predate a change at or before M
// when M existed at the change, that is when N is at or past M's
// position: MessageIntact then says the view is stale.

const (
	markDelete = "delete@"
	markEdit   = "edit@"
)

// mark is the tombstone mark of a change made now in the session.
func (t *Tx) mark(ctx context.Context, kind, sessionID string) (string, error) {
	var top int64
	if err := t.queryRow(ctx, `SELECT COALESCE(MAX(seq), 0) FROM messages WHERE session_id = ?`, sessionID).Scan(&top); err != nil {
		return "", fmt.Errorf("read the session's last position: %w", err)
	}
	return kind + strconv.FormatInt(top, 10), nil
}

// liveMessage returns the position of a live message of the session, or
// ErrNotFound.
func (t *Tx) liveMessage(ctx context.Context, sessionID, messageID string) (int64, error) {
	var seq int64
	err := t.queryRow(ctx, `SELECT seq FROM messages WHERE id = ? AND session_id = ? AND retired = ''`, messageID, sessionID).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("message %s: %w", messageID, store.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("read message %s: %w", messageID, err)
	}
	return seq, nil
}

// RetireMessage implements store.Tx.
func (t *Tx) RetireMessage(ctx context.Context, sessionID, messageID string) ([]string, error) {
	if err := t.LockSession(ctx, sessionID); err != nil {
		return nil, err
	}
	if _, err := t.liveMessage(ctx, sessionID, messageID); err != nil {
		return nil, err
	}
	by, err := t.mark(ctx, markDelete, sessionID)
	if err != nil {
		return nil, err
	}
	parts, err := t.column(ctx, `SELECT id FROM parts WHERE message_id = ? AND retired = '' ORDER BY pos`, messageID)
	if err != nil {
		return nil, err
	}
	if _, err := t.exec(ctx, `UPDATE parts SET retired = ? WHERE message_id = ? AND retired = ''`, by, messageID); err != nil {
		return nil, fmt.Errorf("retire parts of message %s: %w", messageID, err)
	}
	if _, err := t.exec(ctx, `UPDATE messages SET retired = ? WHERE id = ?`, by, messageID); err != nil {
		return nil, fmt.Errorf("retire message %s: %w", messageID, err)
	}
	return parts, nil
}

// RetirePart implements store.Tx.
func (t *Tx) RetirePart(ctx context.Context, sessionID, messageID, partID string) error {
	if err := t.LockSession(ctx, sessionID); err != nil {
		return err
	}
	if _, err := t.liveMessage(ctx, sessionID, messageID); err != nil {
		return err
	}
	by, err := t.mark(ctx, markDelete, sessionID)
	if err != nil {
		return err
	}
	return t.update(ctx, "part "+partID, `UPDATE parts SET retired = ? WHERE id = ? AND message_id = ? AND retired = ''`, by, partID, messageID)
}

// KeepPart implements store.Tx.
func (t *Tx) KeepPart(ctx context.Context, sessionID, messageID, partID, copyID string) error {
	if err := t.LockSession(ctx, sessionID); err != nil {
		return err
	}
	if _, err := t.liveMessage(ctx, sessionID, messageID); err != nil {
		return err
	}
	by, err := t.mark(ctx, markEdit, sessionID)
	if err != nil {
		return err
	}
	return t.update(ctx, "part "+partID, `INSERT INTO parts (id, message_id, session_id, pos, data, retired)
		SELECT ?, message_id, session_id, pos, data, ? FROM parts WHERE id = ? AND message_id = ? AND retired = ''`,
		copyID, by, partID, messageID)
}

// editedBefore reports whether a message or part at or before position
// seq of the session was deleted or changed while the message at seq
// existed.
func (r Reader) editedBefore(ctx context.Context, sessionID string, seq int64) (bool, error) {
	// The LIKE terms are those of the partial indexes messages_edits and
	// parts_edits, which the planner then uses.
	rows, err := r.query(ctx, `SELECT retired FROM messages WHERE session_id = ? AND seq <= ? AND retired LIKE 'delete@%'
		UNION ALL SELECT p.retired FROM parts p JOIN messages m ON m.id = p.message_id
		WHERE p.session_id = ? AND m.seq <= ? AND (p.retired LIKE 'delete@%' OR p.retired LIKE 'edit@%')`,
		sessionID, seq, sessionID, seq)
	if err != nil {
		return false, fmt.Errorf("read the session's edits: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var mark string
		if err := rows.Scan(&mark); err != nil {
			return false, fmt.Errorf("read the session's edits: %w", err)
		}
		_, n, _ := strings.Cut(mark, "@")
		if top, err := strconv.ParseInt(n, 10, 64); err != nil || top >= seq {
			return true, nil
		}
	}
	return false, rows.Err()
}
