package sqlite

import (
	"context"
	"database/sql"
	"time"
)

// Checkpoints copy the WAL's pages into the database file. SQLite runs
// them on the writing connection, inside the commit that crosses the
// WAL's bound (wal_autocheckpoint): with 1,000 busy sessions that was a
// tenth of the committer's time, which every writer waits for, spent
// reading the WAL, writing the database file and fsyncing it. A
// checkpointer on a connection of its own does that beside the
// committer instead: SQLite lets a passive checkpoint run while the
// writer appends to the WAL. The writer's own checkpoint stays, at a
// bound several times higher, as the fallback should this one fall
// behind.

// checkpointEvery is how often, by default, the checkpointer looks for
// commits to copy: the WAL holds about this much of the writes at most,
// while the checkpointer keeps up.
const checkpointEvery = 500 * time.Millisecond

// writerAutoCheckpoint is the writer's fallback bound, in pages.
const writerAutoCheckpoint = 8000

// checkpointer runs passive checkpoints on its own connection after
// commits. Its lifecycle is the store's: Open starts it, Close stops it
// before the final checkpoint.
type checkpointer struct {
	db    *sql.DB
	every time.Duration
	wrote chan struct{} // a commit happened since the last checkpoint
	stop  chan struct{}
	done  chan struct{}
}

func newCheckpointer(db *sql.DB, every time.Duration) *checkpointer {
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	if every <= 0 {
		every = checkpointEvery
	}
	return &checkpointer{db: db, every: every, wrote: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

// committed notes a commit; it never blocks the committer.
func (c *checkpointer) committed() {
	select {
	case c.wrote <- struct{}{}:
	default:
	}
}

func (c *checkpointer) run() {
	defer close(c.done)
	t := time.NewTicker(c.every)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		select {
		case <-c.wrote:
		default:
			continue // nothing new to copy
		}
		// A failed or partial pass leaves the pages in the WAL, where
		// readers and recovery find them; the next pass, or the writer's
		// fallback, copies them. Nothing is lost, so nothing is reported.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, _ = c.db.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)")
		cancel()
	}
}

// close stops the checkpointer and closes its connection; the store's
// Close checkpoints what is left.
func (c *checkpointer) close() error {
	close(c.stop)
	<-c.done
	return c.db.Close()
}
