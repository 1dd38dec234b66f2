package sqlite

import (
	"context"
	"strings"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store/sqlstore"
)

// eventRows bounds the rows of one event insert; insertEvents[n] inserts n.
const eventRows = 16

var insertEvents = func() (q [eventRows + 1]string) {
	for n := 1; n <= eventRows; n++ {
		q[n] = `INSERT INTO events (session_id, type, time_ms, data) VALUES (?, ?, ?, ?)` +
			strings.Repeat(`, (?, ?, ?, ?)`, n-1)
	}
	return q
}()

// appendEvents inserts a transaction's events, up to eventRows a
// statement: a statement's own cost (binding, stepping, resetting through
// database/sql) was most of an event's, and a turn appends about thirty.
// The single writer makes AUTOINCREMENT dense and commit-ordered, so the
// rows of one statement have the seqs that end at its last insert id.
func appendEvents(ctx context.Context, q sqlstore.Querier, evs []core.Event) error {
	args := make([]any, 0, 4*min(len(evs), eventRows))
	for len(evs) > 0 {
		batch := evs[:min(len(evs), eventRows)]
		evs = evs[len(batch):]
		args = args[:0]
		for i := range batch {
			ev := &batch[i]
			args = append(args, ev.SessionID, ev.Type, ev.Time, string(ev.Properties))
		}
		res, err := q.ExecContext(ctx, insertEvents[len(batch)], args...)
		if err != nil {
			return err
		}
		last, err := res.LastInsertId()
		if err != nil {
			return err
		}
		for i := range batch {
			batch[i].Seq = last - int64(len(batch)-1-i)
		}
	}
	return nil
}
