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
	"sync"
	"time"

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

// decodeSessions reads rows of (data, granted): the rules granted by
// "always" answers are agentd's own and kept beside the opencode JSON.
func decodeSessions(rows *sql.Rows) ([]core.Session, error) {
	defer rows.Close()
	var out []core.Session
	for rows.Next() {
		var data, granted string
		if err := rows.Scan(&data, &granted); err != nil {
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
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return out, nil
}

// Session implements store.Reader.
func (r Reader) Session(ctx context.Context, id string) (core.Session, error) {
	rows, err := r.query(ctx, `SELECT data, granted FROM sessions WHERE id = ?`, id)
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
	sqlq := `SELECT data, granted FROM sessions WHERE 1=1`
	var args []any
	if q.Directory != "" {
		sqlq += ` AND directory = ?`
		args = append(args, q.Directory)
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

// Permission implements store.Reader.
func (r Reader) Permission(ctx context.Context, id string) (core.PermissionRequest, error) {
	var p core.PermissionRequest
	err := r.one(ctx, &p, "permission", `SELECT data FROM permissions WHERE id = ?`, id)
	return p, err
}

// PendingPermissions implements store.Reader.
func (r Reader) PendingPermissions(ctx context.Context, sessionID string) ([]core.PermissionRequest, error) {
	var rows *sql.Rows
	var err error
	if sessionID == "" {
		rows, err = r.query(ctx, `SELECT data FROM permissions WHERE pending = 1 ORDER BY id`)
	} else {
		rows, err = r.query(ctx, `SELECT data FROM permissions WHERE pending = 1 AND session_id = ? ORDER BY id`, sessionID)
	}
	if err != nil {
		return nil, fmt.Errorf("list permissions: %w", err)
	}
	return decodeRows[core.PermissionRequest](rows, "permissions")
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

// Question implements store.Reader.
func (r Reader) Question(ctx context.Context, id string) (core.QuestionRequest, error) {
	var q core.QuestionRequest
	err := r.one(ctx, &q, "question", `SELECT data FROM questions WHERE id = ?`, id)
	return q, err
}

// PendingQuestions implements store.Reader.
func (r Reader) PendingQuestions(ctx context.Context, sessionID string) ([]core.QuestionRequest, error) {
	q, args := `SELECT data FROM questions WHERE pending = 1 ORDER BY id`, []any{}
	if sessionID != "" {
		q, args = `SELECT data FROM questions WHERE pending = 1 AND session_id = ? ORDER BY id`, []any{sessionID}
	}
	rows, err := r.query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list questions: %w", err)
	}
	return decodeRows[core.QuestionRequest](rows, "questions")
}

// RunQuestions implements store.Reader.
func (r Reader) RunQuestions(ctx context.Context, runID string) ([]core.QuestionRequest, error) {
	rows, err := r.query(ctx, `SELECT data FROM questions WHERE run_id = ? ORDER BY id`, runID)
	if err != nil {
		return nil, fmt.Errorf("list run questions: %w", err)
	}
	return decodeRows[core.QuestionRequest](rows, "questions")
}

// RunPermissions implements store.Reader.
func (r Reader) RunPermissions(ctx context.Context, runID string) ([]core.PermissionRequest, error) {
	rows, err := r.query(ctx, `SELECT data FROM permissions WHERE run_id = ? ORDER BY id`, runID)
	if err != nil {
		return nil, fmt.Errorf("list run permissions: %w", err)
	}
	return decodeRows[core.PermissionRequest](rows, "permissions")
}

// statusRuns returns, in one read, the session's oldest non-terminal run
// and its most recently ended run (either may be nil), or ErrNotFound when
// the session does not exist.
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
		err := r.queryRow(ctx, `SELECT status FROM sessions WHERE id = ?`, sessionID).Scan(&data)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, store.ErrNotFound
		}
		if err != nil {
			return nil, fmt.Errorf("read status of %s: %w", sessionID, err)
		}
		if data.Valid {
			return []byte(data.String), nil
		}
		// Not written since the column was added: derived below.
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
	if err := r.queryRow(ctx, `SELECT '{' || coalesce(group_concat(json_quote(id) || ':' || coalesce(status, 'null'), ','), '') || '}' FROM sessions WHERE active = 1`).Scan(&raw); err != nil {
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
			stale = append(stale, id) // not written since the column was added
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

var _ store.Tx = (*Tx)(nil)

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
	return t.insert(ctx, "session", `INSERT INTO sessions (id, directory, created_ms, updated_ms, data, granted) VALUES (?, ?, ?, ?, ?, ?)`,
		s.ID, s.Directory, s.Time.Created, s.Time.Updated, data, granted)
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
	if err := t.LockSession(ctx, m.SessionID); err != nil {
		return err
	}
	data, err := encode(m)
	if err != nil {
		return err
	}
	// An id of another session is never overwritten: the update applies
	// only within the message's own session.
	res, err := t.exec(ctx, `INSERT INTO messages (id, session_id, run_id, role, seq, data) VALUES (?, ?, ?, ?, `+nextSeq+`, ?)
		ON CONFLICT (id) DO UPDATE SET run_id = excluded.run_id, data = excluded.data WHERE messages.session_id = excluded.session_id`,
		m.ID, m.SessionID, m.RunID, m.Role, m.SessionID, data)
	return affected(res, err, "put message "+m.ID)
}

// PutPart implements store.Tx.
func (t *Tx) PutPart(ctx context.Context, p core.Part) error {
	if err := t.LockSession(ctx, p.SessionID); err != nil {
		return err
	}
	data, err := encode(p)
	if err != nil {
		return err
	}
	// A part id of another message is never overwritten.
	res, err := t.exec(ctx, `INSERT INTO parts (id, message_id, session_id, pos, data) VALUES (?, ?, ?, `+nextPos+`, ?)
		ON CONFLICT (id) DO UPDATE SET data = excluded.data WHERE parts.message_id = excluded.message_id AND parts.session_id = excluded.session_id`,
		p.ID, p.MessageID, p.SessionID, p.MessageID, data)
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
	data, err := encode(r)
	if err != nil {
		return err
	}
	// A run that has ended is never changed again, whatever the caller
	// believes: the write is conditional on the stored state.
	res, err := t.exec(ctx, `UPDATE runs SET state = ?, ended_ms = ?, data = ? WHERE id = ? AND NOT `+terminalStates,
		r.State, r.Time.Ended, data, r.ID)
	if err != nil {
		return fmt.Errorf("update run %s: %w", r.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("update run %s: %w", r.ID, err)
	} else if n == 1 {
		t.runChanged(r)
		return nil
	}
	var state string
	if err := t.queryRow(ctx, `SELECT state FROM runs WHERE id = ?`, r.ID).Scan(&state); errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	} else if err != nil {
		return fmt.Errorf("update run %s: %w", r.ID, err)
	}
	return fmt.Errorf("update run %s (%s): %w", r.ID, state, store.ErrRunEnded)
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
		data, err := encode(st)
		if err != nil {
			return err
		}
		active := 0
		if st.Type != core.StatusIdle {
			active = 1
		}
		if _, err := t.exec(ctx, `UPDATE sessions SET status = ?, active = ? WHERE id = ?`, data, active, id); err != nil {
			return fmt.Errorf("store status of %s: %w", id, err)
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
