package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// StatusMemo remembers the statuses decoded from the last list read
// (Dialect.StatusColumn), keyed by the exact text read from the database:
// a read that finds the same text skips the decoding, and a read that
// finds another decodes it, so what is returned is always what is stored.
type StatusMemo struct {
	mu  sync.Mutex
	raw string
	m   map[string]core.SessionStatus
}

// decode returns the statuses in raw, a JSON object keyed by session id.
// The map returned is shared and must not be modified.
func (c *StatusMemo) decode(raw string) (map[string]core.SessionStatus, error) {
	if c != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.m != nil && c.raw == raw {
			return c.m, nil
		}
	}
	m := map[string]core.SessionStatus{}
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return nil, err
	}
	if c != nil {
		c.raw, c.m = raw, m
	}
	return m, nil
}

// statusRuns answers which runs feed a session's status: in one read, the
// session's oldest non-terminal run and its most recently ended run
// (either may be nil), or ErrNotFound when the session does not exist.
// It is the one place that says so; Seal's shortcut (a running run alone
// decides) holds because runs execute in this same order.
func (r Reader) statusRuns(ctx context.Context, sessionID string) (active, last *core.Run, err error) {
	var exists sql.NullInt64
	var a, l sql.NullString
	err = r.queryRow(ctx, `SELECT
		(SELECT 1 FROM sessions WHERE id = ?),
		(SELECT `+r.D.runData()+` FROM runs WHERE session_id = ? AND `+activeStates+` ORDER BY created_ms, id LIMIT 1),
		(SELECT data FROM runs WHERE session_id = ? AND state IN ('succeeded', 'failed', 'interrupted') ORDER BY ended_ms DESC, id DESC LIMIT 1)`,
		sessionID, sessionID, sessionID).Scan(&exists, &a, &l)
	if err != nil {
		return nil, nil, fmt.Errorf("read status of %s: %w", sessionID, err)
	}
	if !exists.Valid {
		return nil, nil, store.ErrNotFound
	}
	decode := func(s sql.NullString) (*core.Run, error) {
		if !s.Valid {
			return nil, nil
		}
		var run core.Run
		if err := json.Unmarshal([]byte(s.String), &run); err != nil {
			return nil, fmt.Errorf("decode run: %w", err)
		}
		return &run, nil
	}
	if active, err = decode(a); err != nil {
		return nil, nil, err
	}
	if last, err = decode(l); err != nil {
		return nil, nil, err
	}
	return active, last, nil
}

// derivedStatus reads the runs a status is derived from.
func (r Reader) derivedStatus(ctx context.Context, sessionID string) (core.SessionStatus, error) {
	active, last, err := r.statusRuns(ctx, sessionID)
	if err != nil {
		return core.SessionStatus{}, err
	}
	return core.StatusOf(active, last), nil
}

// SessionStatus implements store.Reader.
func (r Reader) SessionStatus(ctx context.Context, sessionID string) (core.SessionStatus, error) {
	var st core.SessionStatus
	b, err := r.SessionStatusJSON(ctx, sessionID)
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("decode status of %s: %w", sessionID, err)
	}
	return st, nil
}

// SessionStatusJSON implements store.Reader.
func (r Reader) SessionStatusJSON(ctx context.Context, sessionID string) ([]byte, error) {
	if r.D.StatusColumn {
		var data sql.NullString
		err := r.queryRow(ctx, `SELECT CASE WHEN status_rule = ? THEN status END FROM sessions WHERE id = ?`, core.StatusRule, sessionID).Scan(&data)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, store.ErrNotFound
		}
		if err != nil {
			return nil, fmt.Errorf("read status of %s: %w", sessionID, err)
		}
		if data.Valid {
			return []byte(data.String), nil
		}
		// Not written since the column was added, or by another version
		// of the rule: derived below.
	}
	st, err := r.derivedStatus(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	return json.Marshal(st)
}

// ActiveStatuses implements store.Reader.
func (r Reader) ActiveStatuses(ctx context.Context) (map[string]core.SessionStatus, error) {
	if !r.D.StatusColumn {
		runs, err := r.ActiveRuns(ctx, "")
		if err != nil {
			return nil, err
		}
		out := make(map[string]core.SessionStatus, len(runs))
		for i := range runs {
			if _, ok := out[runs[i].SessionID]; !ok {
				out[runs[i].SessionID] = core.StatusOf(&runs[i], nil)
			}
		}
		return out, nil
	}
	// One row holding every busy session's stored status as a JSON object
	// (concatenated, not re-parsed by SQLite), so that the list costs one
	// string, decoded only when it changed since the last read (a poller
	// mostly reads the same statuses again).
	var raw string
	if err := r.queryRow(ctx, `SELECT '{' || coalesce(group_concat(json_quote(id) || ':' || coalesce(CASE WHEN status_rule = ? THEN status END, 'null'), ','), '') || '}' FROM sessions WHERE active = 1`, core.StatusRule).Scan(&raw); err != nil {
		return nil, fmt.Errorf("list active sessions: %w", err)
	}
	stored, err := r.Memo.decode(raw)
	if err != nil {
		return nil, fmt.Errorf("decode active statuses: %w", err)
	}
	out := make(map[string]core.SessionStatus, len(stored))
	var stale []string
	for id, st := range stored {
		if st.Type == "" {
			stale = append(stale, id) // not written, or by another rule
			continue
		}
		out[id] = st
	}
	for _, id := range stale {
		st, err := r.derivedStatus(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if st.Type != core.StatusIdle {
			out[id] = st
		}
	}
	return out, nil
}

// RefreshStatuses rewrites the stored statuses that another version of
// the rule computed (or none did), from the runs: run at start-up, once
// per rule change, so that reads find current rows again. It returns how
// many it rewrote.
func (t *Tx) RefreshStatuses(ctx context.Context) (int, error) {
	ids, err := t.column(ctx, `SELECT id FROM sessions WHERE status_rule != ? OR status IS NULL`, core.StatusRule)
	if err != nil {
		return 0, fmt.Errorf("find stale statuses: %w", err)
	}
	for _, id := range ids {
		st, err := t.derivedStatus(ctx, id)
		if err != nil {
			return 0, err
		}
		if err := t.storeStatus(ctx, id, st); err != nil {
			return 0, err
		}
	}
	return len(ids), nil
}

// storeStatus writes a session's status, under the current rule, and
// whether it is active (the busy list's index).
func (t *Tx) storeStatus(ctx context.Context, id string, st core.SessionStatus) error {
	data, err := encode(st)
	if err != nil {
		return err
	}
	active := 0
	if st.Type != core.StatusIdle {
		active = 1
	}
	// Most writes leave the status as it was (each step of a busy run
	// rewrote the same busy status): the condition leaves such a row, and
	// its page, untouched.
	if _, err := t.exec(ctx, `UPDATE sessions SET status = ?, status_rule = ?, active = ?
		WHERE id = ? AND (status IS NOT ? OR status_rule IS NOT ? OR active IS NOT ?)`,
		data, core.StatusRule, active, id, data, core.StatusRule, active); err != nil {
		return fmt.Errorf("store status of %s: %w", id, err)
	}
	return nil
}
