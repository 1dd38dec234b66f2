package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// Tx implements store.Tx on top of a Reader bound to a transaction. It
// collects appended events for the commit hook.
type Tx struct {
	Reader
	Appended []core.Event
	locked   map[string]bool
	// runsOf lists the sessions whose runs this transaction changed, whose
	// stored status Seal rewrites (Dialect.StatusColumn), with the last
	// run written for each.
	runsOf []changedRun
}

type changedRun struct {
	sessionID string
	last      core.Run
}

// runChanged notes that a run of its session changed.
func (t *Tx) runChanged(r core.Run) {
	if !t.D.StatusColumn {
		return
	}
	for i := range t.runsOf {
		if t.runsOf[i].sessionID == r.SessionID {
			t.runsOf[i].last = r
			return
		}
	}
	t.runsOf = append(t.runsOf, changedRun{sessionID: r.SessionID, last: r})
}

func (t *Tx) insert(ctx context.Context, what, q string, args ...any) error {
	if _, err := t.exec(ctx, q, args...); err != nil {
		if t.D.IsConflict(err) {
			return fmt.Errorf("insert %s: %w", what, store.ErrConflict)
		}
		return fmt.Errorf("insert %s: %w", what, err)
	}
	return nil
}

func (t *Tx) update(ctx context.Context, what, q string, args ...any) error {
	res, err := t.exec(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("update %s: %w", what, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("update %s: %w", what, err)
	}
	if n == 0 {
		return store.ErrNotFound
	}
	return nil
}

func encode(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

// InsertSession implements store.Tx.
func (t *Tx) InsertSession(ctx context.Context, s core.Session) error {
	data, err := encode(s)
	if err != nil {
		return err
	}
	granted, err := encodeRules(s.Granted)
	if err != nil {
		return err
	}
	if !t.D.StatusColumn {
		return t.insert(ctx, "session", `INSERT INTO sessions (id, directory, created_ms, updated_ms, data, granted, owner_key) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			s.ID, s.Directory, s.Time.Created, s.Time.Updated, data, granted, s.Owner)
	}
	// A new session has no runs: its status is known and stored with it.
	// Left unset, every read derived it, and the next start-up rewrote
	// each such session in one transaction (5 s for 100,000).
	status, err := encode(core.StatusOf(nil, nil))
	if err != nil {
		return err
	}
	return t.insert(ctx, "session", `INSERT INTO sessions (id, directory, created_ms, updated_ms, data, granted, owner_key, status, status_rule, active)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0)`,
		s.ID, s.Directory, s.Time.Created, s.Time.Updated, data, granted, s.Owner, status, core.StatusRule)
}

func encodeRules(rules []core.Rule) (string, error) {
	if rules == nil {
		return "[]", nil
	}
	return encode(rules)
}

// UpdateSession implements store.Tx.
func (t *Tx) UpdateSession(ctx context.Context, s core.Session) error {
	data, err := encode(s)
	if err != nil {
		return err
	}
	granted, err := encodeRules(s.Granted)
	if err != nil {
		return err
	}
	return t.update(ctx, "session", `UPDATE sessions SET directory = ?, updated_ms = ?, data = ?, granted = ? WHERE id = ?`,
		s.Directory, s.Time.Updated, data, granted, s.ID)
}

// DeleteSession implements store.Tx.
func (t *Tx) DeleteSession(ctx context.Context, id string) error {
	// Children first, so drivers need not rely on cascading foreign keys.
	for _, q := range []string{
		`DELETE FROM permissions WHERE session_id = ?`,
		`DELETE FROM questions WHERE session_id = ?`,
		`DELETE FROM reverts WHERE session_id = ?`,
		`DELETE FROM parts WHERE session_id = ?`,
		`DELETE FROM messages WHERE session_id = ?`,
		`DELETE FROM runs WHERE session_id = ?`,
	} {
		if _, err := t.exec(ctx, q, id); err != nil {
			return fmt.Errorf("delete session %s: %w", id, err)
		}
	}
	return t.update(ctx, "session", `DELETE FROM sessions WHERE id = ?`, id)
}

// nextSeq and nextPos are the next positions of a message in its session
// and of a part in its message (each takes the owner's id).
const (
	nextSeq = `(SELECT COALESCE(MAX(seq), 0) + 1 FROM messages WHERE session_id = ?)`
	nextPos = `(SELECT COALESCE(MAX(pos), 0) + 1 FROM parts WHERE message_id = ?)`
)

// affected turns an upsert that changed no row (its id belongs to another
// owner) into ErrConflict.
func affected(res sql.Result, err error, what string) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if n == 0 {
		return fmt.Errorf("%s: %w", what, store.ErrConflict)
	}
	return nil
}

// InsertMessage implements store.Tx.
func (t *Tx) InsertMessage(ctx context.Context, m core.Message) error {
	if err := t.LockSession(ctx, m.SessionID); err != nil {
		return err
	}
	data, err := encode(m)
	if err != nil {
		return err
	}
	return t.insert(ctx, "message", `INSERT INTO messages (id, session_id, run_id, role, seq, data) VALUES (?, ?, ?, ?, `+nextSeq+`, ?)`,
		m.ID, m.SessionID, m.RunID, m.Role, m.SessionID, data)
}

// PutMessage implements store.Tx.
func (t *Tx) PutMessage(ctx context.Context, m core.Message) error {
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return t.PutMessageJSON(ctx, m, data)
}

// PutMessageJSON implements store.Tx.
func (t *Tx) PutMessageJSON(ctx context.Context, m core.Message, data []byte) error {
	if err := t.LockSession(ctx, m.SessionID); err != nil {
		return err
	}
	// An id of another session is never overwritten: the update applies
	// only within the message's own session.
	res, err := t.exec(ctx, `INSERT INTO messages (id, session_id, run_id, role, seq, data) VALUES (?, ?, ?, ?, `+nextSeq+`, ?)
		ON CONFLICT (id) DO UPDATE SET run_id = excluded.run_id, data = excluded.data WHERE messages.session_id = excluded.session_id`,
		m.ID, m.SessionID, m.RunID, m.Role, m.SessionID, string(data))
	return affected(res, err, "put message "+m.ID)
}

// PutPart implements store.Tx.
func (t *Tx) PutPart(ctx context.Context, p core.Part) error {
	data, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return t.PutPartJSON(ctx, p, data)
}

// PutPartJSON implements store.Tx.
func (t *Tx) PutPartJSON(ctx context.Context, p core.Part, data []byte) error {
	if err := t.LockSession(ctx, p.SessionID); err != nil {
		return err
	}
	// A part id of another message is never overwritten.
	res, err := t.exec(ctx, `INSERT INTO parts (id, message_id, session_id, pos, data) VALUES (?, ?, ?, `+nextPos+`, ?)
		ON CONFLICT (id) DO UPDATE SET data = excluded.data WHERE parts.message_id = excluded.message_id AND parts.session_id = excluded.session_id`,
		p.ID, p.MessageID, p.SessionID, p.MessageID, string(data))
	return affected(res, err, "put part "+p.ID)
}

// RetireFrom implements store.Tx.
func (t *Tx) RetireFrom(ctx context.Context, sessionID, messageID, partID, by string) (msgs, parts []string, err error) {
	if err := t.LockSession(ctx, sessionID); err != nil {
		return nil, nil, err
	}
	var seq int64
	if err := t.queryRow(ctx, `SELECT seq FROM messages WHERE id = ? AND session_id = ? AND retired = ''`, messageID, sessionID).Scan(&seq); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, nil, fmt.Errorf("retire from message %s: %w", messageID, store.ErrNotFound)
		}
		return nil, nil, fmt.Errorf("retire from message %s: %w", messageID, err)
	}
	from := seq
	if partID != "" {
		var pos int64
		if err := t.queryRow(ctx, `SELECT pos FROM parts WHERE id = ? AND message_id = ? AND retired = ''`, partID, messageID).Scan(&pos); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return nil, nil, fmt.Errorf("retire from part %s: %w", partID, store.ErrNotFound)
			}
			return nil, nil, fmt.Errorf("retire from part %s: %w", partID, err)
		}
		if parts, err = t.column(ctx, `SELECT id FROM parts WHERE message_id = ? AND pos >= ? AND retired = '' ORDER BY pos`, messageID, pos); err != nil {
			return nil, nil, err
		}
		if _, err := t.exec(ctx, `UPDATE parts SET retired = ? WHERE message_id = ? AND pos >= ? AND retired = ''`, by, messageID, pos); err != nil {
			return nil, nil, fmt.Errorf("retire parts: %w", err)
		}
		from = seq + 1
	}
	if msgs, err = t.column(ctx, `SELECT id FROM messages WHERE session_id = ? AND seq >= ? AND retired = '' ORDER BY seq`, sessionID, from); err != nil {
		return nil, nil, err
	}
	if _, err := t.exec(ctx, `UPDATE parts SET retired = ? WHERE retired = '' AND message_id IN
		(SELECT id FROM messages WHERE session_id = ? AND seq >= ? AND retired = '')`, by, sessionID, from); err != nil {
		return nil, nil, fmt.Errorf("retire parts: %w", err)
	}
	if _, err := t.exec(ctx, `UPDATE messages SET retired = ? WHERE session_id = ? AND seq >= ? AND retired = ''`, by, sessionID, from); err != nil {
		return nil, nil, fmt.Errorf("retire messages: %w", err)
	}
	return msgs, parts, nil
}

// column reads one text column of the rows a query returns.
func (t *Tx) column(ctx context.Context, q string, args ...any) ([]string, error) {
	rows, err := t.query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// InsertRun implements store.Tx.
func (t *Tx) InsertRun(ctx context.Context, r core.Run) error {
	data, err := encode(r)
	if err != nil {
		return err
	}
	if err := t.insert(ctx, "run", `INSERT INTO runs (id, session_id, state, created_ms, ended_ms, data) VALUES (?, ?, ?, ?, ?, ?)`,
		r.ID, r.SessionID, r.State, r.Time.Created, r.Time.Ended, data); err != nil {
		return err
	}
	t.runChanged(r)
	return nil
}

// UpdateRun implements store.Tx.
func (t *Tx) UpdateRun(ctx context.Context, r core.Run) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return t.UpdateRunJSON(ctx, r, data)
}

// UpdateRunJSON implements store.Tx.
func (t *Tx) UpdateRunJSON(ctx context.Context, r core.Run, data []byte) error {
	// A run that has ended is never changed again, whatever the caller
	// believes: the write is conditional on the stored state. Most updates
	// (a step's count, a phase) leave the state as it is; they set only
	// the data, since SQLite rewrites the entries of every index whose
	// columns, or partial-index condition, an UPDATE sets, changed or not:
	// three run indexes depend on the state.
	res, err := t.exec(ctx, `UPDATE runs SET data = ? WHERE id = ? AND state = ? AND ended_ms = ? AND NOT `+terminalStates,
		string(data), r.ID, r.State, r.Time.Ended)
	if done, err := t.updatedRun(res, err, r); done || err != nil {
		return err
	}
	res, err = t.exec(ctx, `UPDATE runs SET state = ?, ended_ms = ?, data = ? WHERE id = ? AND NOT `+terminalStates,
		r.State, r.Time.Ended, string(data), r.ID)
	if done, err := t.updatedRun(res, err, r); done || err != nil {
		return err
	}
	var state string
	if err := t.queryRow(ctx, `SELECT state FROM runs WHERE id = ?`, r.ID).Scan(&state); errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	} else if err != nil {
		return fmt.Errorf("update run %s: %w", r.ID, err)
	}
	return fmt.Errorf("update run %s (%s): %w", r.ID, state, store.ErrRunEnded)
}

// updatedRun reports whether an update of run r changed its row.
func (t *Tx) updatedRun(res sql.Result, err error, r core.Run) (bool, error) {
	if err != nil {
		return false, fmt.Errorf("update run %s: %w", r.ID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("update run %s: %w", r.ID, err)
	}
	if n == 1 {
		t.runChanged(r)
	}
	return n == 1, nil
}

// PutTodos implements store.Tx.
func (t *Tx) PutTodos(ctx context.Context, sessionID string, todos []core.Todo) error {
	if todos == nil {
		todos = []core.Todo{}
	}
	data, err := json.Marshal(todos)
	if err != nil {
		return fmt.Errorf("encode todos: %w", err)
	}
	if err := t.update(ctx, "todos", `UPDATE sessions SET todos = ? WHERE id = ?`, string(data), sessionID); err != nil {
		return fmt.Errorf("session %s: %w", sessionID, err)
	}
	return nil
}

// PutQuestion implements store.Tx.
func (t *Tx) PutQuestion(ctx context.Context, q core.QuestionRequest) error {
	data, err := encode(q)
	if err != nil {
		return err
	}
	pending := 0
	if q.Pending() {
		pending = 1
	}
	_, err = t.exec(ctx, `INSERT INTO questions (id, session_id, run_id, pending, data) VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET pending = excluded.pending, data = excluded.data`,
		q.ID, q.SessionID, q.RunID, pending, data)
	if err != nil {
		return fmt.Errorf("put question %s: %w", q.ID, err)
	}
	return nil
}

// PutPermission implements store.Tx.
func (t *Tx) PutPermission(ctx context.Context, p core.PermissionRequest) error {
	data, err := encode(p)
	if err != nil {
		return err
	}
	pending := 0
	if p.Reply == "" {
		pending = 1
	}
	_, err = t.exec(ctx, `INSERT INTO permissions (id, session_id, run_id, pending, data) VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET pending = excluded.pending, data = excluded.data`,
		p.ID, p.SessionID, p.RunID, pending, data)
	if err != nil {
		return fmt.Errorf("put permission %s: %w", p.ID, err)
	}
	return nil
}

// AppendEvent implements store.Tx. The event is written by Seal.
func (t *Tx) AppendEvent(_ context.Context, ev core.Event) error {
	if ev.Time == 0 {
		ev.Time = time.Now().UnixMilli()
	}
	t.Appended = append(t.Appended, ev)
	return nil
}

// Seal writes the events appended in the transaction and gives them their
// seq. Drivers call it last, right before the commit: a driver that
// serialises seq assignment then holds that lock only for the commit.
func (t *Tx) Seal(ctx context.Context) error {
	for _, c := range t.runsOf {
		id := c.sessionID
		var st core.SessionStatus
		if c.last.State == core.RunRunning || c.last.State == core.RunRetrying {
			// Runs execute one at a time in their order of arrival, so a
			// running run is its session's oldest non-terminal one: it
			// alone decides the status, and the runs need not be read.
			st = core.StatusOf(&c.last, nil)
		} else {
			var err error
			st, err = t.derivedStatus(ctx, id)
			if errors.Is(err, store.ErrNotFound) {
				continue // deleted in this transaction
			}
			if err != nil {
				return err
			}
		}
		if err := t.storeStatus(ctx, id, st); err != nil {
			return err
		}
	}
	t.runsOf = t.runsOf[:0]
	if len(t.Appended) == 0 {
		return nil
	}
	if err := t.D.AppendEvents(ctx, t.Q, t.Appended); err != nil {
		return fmt.Errorf("append %d events: %w", len(t.Appended), err)
	}
	for i := range t.Appended {
		t.Appended[i].ID = core.DurableEventID(t.Appended[i].Seq)
	}
	return nil
}

// LockSession implements store.Tx.
func (t *Tx) LockSession(ctx context.Context, id string) error {
	if t.D.LockSession == nil || t.locked[id] {
		return nil
	}
	if err := t.D.LockSession(ctx, t.Q, id); err != nil {
		return fmt.Errorf("lock session %s: %w", id, err)
	}
	if t.locked == nil {
		t.locked = map[string]bool{}
	}
	t.locked[id] = true
	return nil
}
