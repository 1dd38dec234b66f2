// Package sqlstore holds the SQL shared by agentd's database drivers: the
// reads and writes of store.Reader and store.Tx over database/sql, written
// once with '?' placeholders and rebound per dialect.
package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// Querier is what *sql.DB, *sql.Conn and *sql.Tx have in common.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Dialect adapts the shared SQL to one database.
type Dialect struct {
	// Dollar numbers placeholders $1, $2, … instead of '?'.
	Dollar bool
	// IsConflict reports whether err is a unique-constraint violation.
	IsConflict func(error) bool
	// AppendEvents inserts a transaction's events, right before it
	// commits, and sets their Seq; drivers differ in how they keep seq
	// dense and in commit order.
	AppendEvents func(ctx context.Context, q Querier, evs []core.Event) error
	// LockSession, when set, holds a lock on the session until commit, so
	// that transactions deciding on one session's messages or runs follow
	// each other. A driver with a single writer needs none.
	LockSession func(ctx context.Context, q Querier, id string) error
	// RunData, when set, is the SQL expression that reads a run's JSON in
	// place of its data column: a driver whose runs are leased reports
	// there a run whose lease has lapsed as recovering.
	RunData string
	// LastSeq returns the last assigned seq.
	LastSeq func(ctx context.Context, q Querier) (int64, error)
	// StatusColumn keeps each session's status, derived from its runs,
	// in the sessions row (status, active), rewritten by every
	// transaction that changes one of its runs, so that a status read is
	// one row. A driver whose status also depends on the clock (RunData)
	// cannot store it and derives it at each read.
	StatusColumn bool
}

// runData is the expression that reads a run's JSON.
func (d *Dialect) runData() string {
	if d.RunData == "" {
		return "data"
	}
	return d.RunData
}

func (d *Dialect) rebind(q string) string {
	if !d.Dollar {
		return q
	}
	var sb strings.Builder
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			sb.WriteByte('$')
			sb.WriteString(strconv.Itoa(n))
			continue
		}
		sb.WriteByte(q[i])
	}
	return sb.String()
}

// Reader implements store.Reader over a Querier.
type Reader struct {
	Q Querier
	D *Dialect
	// Memo, when set, keeps the last decoded list of stored statuses.
	Memo *StatusMemo
}

var _ store.Reader = Reader{}

func (r Reader) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return r.Q.QueryContext(ctx, r.D.rebind(q), args...)
}

func (r Reader) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	return r.Q.QueryRowContext(ctx, r.D.rebind(q), args...)
}

func (r Reader) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return r.Q.ExecContext(ctx, r.D.rebind(q), args...)
}

func decodeRows[T any](rows *sql.Rows, what string) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		var data string
		if err := rows.Scan(&data); err != nil {
			return nil, fmt.Errorf("scan %s: %w", what, err)
		}
		var v T
		if err := json.Unmarshal([]byte(data), &v); err != nil {
			return nil, fmt.Errorf("decode %s: %w", what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list %s: %w", what, err)
	}
	return out, nil
}

// messageCols are the columns decodeMessages reads.
const messageCols = `run_id, seq, data`

// decodeMessages reads rows of messageCols: a message's run and its place
// in the session travel in columns of their own, not in the opencode JSON.
func decodeMessages(rows *sql.Rows) ([]core.Message, error) {
	defer rows.Close()
	var out []core.Message
	for rows.Next() {
		var runID, data string
		var seq int64
		if err := rows.Scan(&runID, &seq, &data); err != nil {
			return nil, fmt.Errorf("scan messages: %w", err)
		}
		var m core.Message
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			return nil, fmt.Errorf("decode messages: %w", err)
		}
		m.RunID, m.Seq = runID, seq
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list messages: %w", err)
	}
	return out, nil
}

func (r Reader) one(ctx context.Context, v any, what, q string, args ...any) error {
	var data string
	err := r.queryRow(ctx, q, args...).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("get %s: %w", what, err)
	}
	if err := json.Unmarshal([]byte(data), v); err != nil {
		return fmt.Errorf("decode %s: %w", what, err)
	}
	return nil
}

// sessionCols are the columns decodeSessions reads.
const sessionCols = `data, granted, owner_key`

// decodeSessions reads rows of sessionCols: the rules granted by "always"
// answers and the key that owns the session are agentd's own and kept
// beside the opencode JSON.
func decodeSessions(rows *sql.Rows) ([]core.Session, error) {
	defer rows.Close()
	var out []core.Session
	for rows.Next() {
		var data, granted, owner string
		if err := rows.Scan(&data, &granted, &owner); err != nil {
			return nil, fmt.Errorf("scan sessions: %w", err)
		}
		var s core.Session
		if err := json.Unmarshal([]byte(data), &s); err != nil {
			return nil, fmt.Errorf("decode sessions: %w", err)
		}
		if granted != "[]" {
			if err := json.Unmarshal([]byte(granted), &s.Granted); err != nil {
				return nil, fmt.Errorf("decode granted rules: %w", err)
			}
		}
		s.Owner = owner
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return out, nil
}

// Session implements store.Reader.
func (r Reader) Session(ctx context.Context, id string) (core.Session, error) {
	rows, err := r.query(ctx, `SELECT `+sessionCols+` FROM sessions WHERE id = ?`, id)
	if err != nil {
		return core.Session{}, fmt.Errorf("get session: %w", err)
	}
	list, err := decodeSessions(rows)
	if err != nil {
		return core.Session{}, err
	}
	if len(list) == 0 {
		return core.Session{}, store.ErrNotFound
	}
	return list[0], nil
}

// Sessions implements store.Reader.
func (r Reader) Sessions(ctx context.Context, q store.SessionQuery) ([]core.Session, error) {
	sqlq := `SELECT ` + sessionCols + ` FROM sessions WHERE 1=1`
	var args []any
	if q.Directory != "" {
		sqlq += ` AND directory = ?`
		args = append(args, q.Directory)
	}
	if q.Owner != "" {
		// The literal condition lets SQLite use the partial index.
		sqlq += ` AND owner_key = ? AND owner_key <> ''`
		args = append(args, q.Owner)
	}
	if q.AfterID != "" {
		sqlq += ` AND (updated_ms < ? OR updated_ms = ? AND id > ?)`
		args = append(args, q.AfterUpdated, q.AfterUpdated, q.AfterID)
	}
	sqlq += ` ORDER BY updated_ms DESC, id`
	if q.Limit > 0 {
		sqlq += ` LIMIT ?`
		args = append(args, q.Limit)
	}
	rows, err := r.query(ctx, sqlq, args...)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return decodeSessions(rows)
}

// Messages implements store.Reader.
func (r Reader) Messages(ctx context.Context, sessionID string, q store.MessageQuery) ([]core.MessageWithParts, error) {
	sqlq := `SELECT ` + messageCols + ` FROM messages WHERE session_id = ? AND retired = ''`
	args := []any{sessionID}
	// Positions are the server's order of arrival; a message named by id
	// is found by its position.
	const at = `(SELECT seq FROM messages WHERE id = ? AND session_id = ?)`
	if q.Before != "" {
		sqlq += ` AND seq < ` + at
		args = append(args, q.Before, sessionID)
	}
	if q.Since != "" {
		sqlq += ` AND seq >= ` + at
		args = append(args, q.Since, sessionID)
	}
	if q.After != "" {
		sqlq += ` AND seq > ` + at
		args = append(args, q.After, sessionID)
	}
	sqlq += ` ORDER BY seq DESC`
	if q.Limit > 0 {
		sqlq += ` LIMIT ?`
		args = append(args, q.Limit)
	}
	rows, err := r.query(ctx, sqlq, args...)
	if err != nil {
		return nil, fmt.Errorf("list messages: %w", err)
	}
	infos, err := decodeMessages(rows)
	if err != nil {
		return nil, err
	}
	out := make([]core.MessageWithParts, len(infos))
	index := make(map[string]int, len(infos))
	for i := range infos {
		// Newest first from the query; the API wants oldest first.
		j := len(infos) - 1 - i
		out[j] = core.MessageWithParts{Info: infos[i], Parts: []core.Part{}}
		index[infos[i].ID] = j
	}
	if len(infos) == 0 {
		return out, nil
	}
	// Parts come newest message first, so that a byte budget keeps the
	// newest messages whole and stops reading at the first message past it.
	pq := `SELECT p.data FROM parts p JOIN messages m ON m.id = p.message_id
		WHERE m.session_id = ? AND m.seq >= ? AND m.seq <= ? AND m.retired = '' AND p.retired = '' ORDER BY m.seq DESC, p.pos`
	rows, err = r.query(ctx, pq, sessionID, out[0].Info.Seq, out[len(out)-1].Info.Seq)
	if err != nil {
		return nil, fmt.Errorf("list parts: %w", err)
	}
	defer rows.Close()
	total, cur := 0, len(out)
	for rows.Next() {
		var data string
		if err := rows.Scan(&data); err != nil {
			return nil, fmt.Errorf("scan parts: %w", err)
		}
		var p core.Part
		if err := json.Unmarshal([]byte(data), &p); err != nil {
			return nil, fmt.Errorf("decode parts: %w", err)
		}
		j, ok := index[p.MessageID]
		if !ok {
			continue
		}
		if j != cur {
			if q.MaxBytes > 0 && total > q.MaxBytes {
				// Every message older than the last one read is left
				// out, those without parts too.
				return out[cur:], rows.Close()
			}
			cur = j
		}
		total += len(data)
		out[j].Parts = append(out[j].Parts, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list parts: %w", err)
	}
	return out, nil
}

// MessageSeqs implements store.Reader.
func (r Reader) MessageSeqs(ctx context.Context, sessionID string, after int64) ([]store.MessageSeq, error) {
	rows, err := r.query(ctx, `SELECT id, seq FROM messages WHERE session_id = ? AND seq > ? AND retired = '' ORDER BY seq`, sessionID, after)
	if err != nil {
		return nil, fmt.Errorf("list message positions: %w", err)
	}
	defer rows.Close()
	var out []store.MessageSeq
	for rows.Next() {
		var m store.MessageSeq
		if err := rows.Scan(&m.ID, &m.Seq); err != nil {
			return nil, fmt.Errorf("scan message positions: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list message positions: %w", err)
	}
	return out, nil
}

// MessageIntact implements store.Reader.
func (r Reader) MessageIntact(ctx context.Context, sessionID, messageID string) (bool, error) {
	var seq int64
	err := r.queryRow(ctx, `SELECT seq FROM messages WHERE id = ? AND session_id = ? AND retired = ''
		AND NOT EXISTS (SELECT 1 FROM parts WHERE message_id = ? AND retired != ''
			AND retired NOT LIKE 'edit@%' AND retired NOT LIKE 'delete@%')`,
		messageID, sessionID, messageID).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("check message %s: %w", messageID, err)
	}
	edited, err := r.editedBefore(ctx, sessionID, seq)
	return err == nil && !edited, err
}

// RunMessages implements store.Reader.
func (r Reader) RunMessages(ctx context.Context, runID string) ([]core.Message, error) {
	rows, err := r.query(ctx, `SELECT `+messageCols+` FROM messages WHERE run_id = ? AND retired = '' ORDER BY seq`, runID)
	if err != nil {
		return nil, fmt.Errorf("list run messages: %w", err)
	}
	return decodeMessages(rows)
}

// LastRunMessage implements store.Reader. It spares the callers that want
// a run's last answer decoding every message of the run first.
func (r Reader) LastRunMessage(ctx context.Context, runID, role string) (core.MessageWithParts, error) {
	rows, err := r.query(ctx, `SELECT `+messageCols+` FROM messages WHERE run_id = ? AND role = ? AND retired = '' ORDER BY seq DESC LIMIT 1`, runID, role)
	if err != nil {
		return core.MessageWithParts{}, fmt.Errorf("get last %s message of run %s: %w", role, runID, err)
	}
	return r.withParts(ctx, rows)
}

// Message implements store.Reader.
func (r Reader) Message(ctx context.Context, sessionID, messageID string) (core.MessageWithParts, error) {
	rows, err := r.query(ctx, `SELECT `+messageCols+` FROM messages WHERE id = ? AND session_id = ? AND retired = ''`, messageID, sessionID)
	if err != nil {
		return core.MessageWithParts{}, fmt.Errorf("get message: %w", err)
	}
	return r.withParts(ctx, rows)
}

// withParts decodes the one message rows hold, or none (ErrNotFound), and
// reads its parts.
func (r Reader) withParts(ctx context.Context, rows *sql.Rows) (core.MessageWithParts, error) {
	var m core.MessageWithParts
	infos, err := decodeMessages(rows)
	if err != nil {
		return m, err
	}
	if len(infos) == 0 {
		return m, store.ErrNotFound
	}
	m.Info = infos[0]
	rows, err = r.query(ctx, `SELECT data FROM parts WHERE message_id = ? AND retired = '' ORDER BY pos`, m.Info.ID)
	if err != nil {
		return m, fmt.Errorf("list parts: %w", err)
	}
	m.Parts, err = decodeRows[core.Part](rows, "parts")
	if m.Parts == nil {
		m.Parts = []core.Part{}
	}
	return m, err
}

// Run implements store.Reader.
func (r Reader) Run(ctx context.Context, id string) (core.Run, error) {
	var run core.Run
	err := r.one(ctx, &run, "run", `SELECT `+r.D.runData()+` FROM runs WHERE id = ?`, id)
	return run, err
}

// Runs implements store.Reader.
func (r Reader) Runs(ctx context.Context, sessionID string, limit int) ([]core.Run, error) {
	q := `SELECT ` + r.D.runData() + ` FROM runs WHERE session_id = ? ORDER BY id DESC`
	args := []any{sessionID}
	if limit > 0 {
		q += ` LIMIT ?`
		args = append(args, limit)
	}
	rows, err := r.query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return decodeRows[core.Run](rows, "runs")
}

const (
	activeStates   = `state IN ('queued', 'running', 'retrying')`
	terminalStates = `state IN ('succeeded', 'failed', 'interrupted')`
)

// ActiveRuns implements store.Reader.
func (r Reader) ActiveRuns(ctx context.Context, sessionID string) ([]core.Run, error) {
	var rows *sql.Rows
	var err error
	if sessionID == "" {
		rows, err = r.query(ctx, `SELECT `+r.D.runData()+` FROM runs WHERE `+activeStates+` ORDER BY created_ms, id`)
	} else {
		rows, err = r.query(ctx, `SELECT `+r.D.runData()+` FROM runs WHERE session_id = ? AND `+activeStates+` ORDER BY created_ms, id`, sessionID)
	}
	if err != nil {
		return nil, fmt.Errorf("list active runs: %w", err)
	}
	return decodeRows[core.Run](rows, "runs")
}

// Todos implements store.Reader.
func (r Reader) Todos(ctx context.Context, sessionID string) ([]core.Todo, error) {
	var data string
	err := r.queryRow(ctx, `SELECT todos FROM sessions WHERE id = ?`, sessionID).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("session %s: %w", sessionID, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read todos: %w", err)
	}
	todos := []core.Todo{}
	if err := json.Unmarshal([]byte(data), &todos); err != nil {
		return nil, fmt.Errorf("decode todos: %w", err)
	}
	return todos, nil
}

// Events implements store.Reader.
func (r Reader) Events(ctx context.Context, q store.EventQuery) ([]core.Event, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 1000
	}
	var rows *sql.Rows
	var err error
	if q.SessionID != "" {
		rows, err = r.query(ctx, `SELECT seq, session_id, type, time_ms, data FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?`, q.SessionID, q.After, limit)
	} else {
		rows, err = r.query(ctx, `SELECT seq, session_id, type, time_ms, data FROM events WHERE seq > ? ORDER BY seq LIMIT ?`, q.After, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	defer rows.Close()
	out := make([]core.Event, 0, 64)
	size := 0
	for rows.Next() {
		var ev core.Event
		var data string
		if err := rows.Scan(&ev.Seq, &ev.SessionID, &ev.Type, &ev.Time, &data); err != nil {
			return nil, fmt.Errorf("scan event: %w", err)
		}
		ev.Properties = json.RawMessage(data)
		ev.ID = core.DurableEventID(ev.Seq)
		out = append(out, ev)
		if size += len(data); q.MaxBytes > 0 && size >= q.MaxBytes {
			break
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	return out, nil
}

// EventBounds implements store.Reader.
func (r Reader) EventBounds(ctx context.Context) (first, last int64, err error) {
	last, err = r.D.LastSeq(ctx, r.Q)
	if err != nil {
		return 0, 0, fmt.Errorf("last event seq: %w", err)
	}
	var minSeq sql.NullInt64
	if err := r.queryRow(ctx, `SELECT MIN(seq) FROM events`).Scan(&minSeq); err != nil {
		return 0, 0, fmt.Errorf("first event seq: %w", err)
	}
	if !minSeq.Valid {
		return last + 1, last, nil
	}
	return minSeq.Int64, last, nil
}

var _ store.Tx = (*Tx)(nil)
