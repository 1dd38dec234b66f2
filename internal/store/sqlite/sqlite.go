// Package sqlite is the embedded store driver: one SQLite file in WAL mode
// with synchronous=FULL, one writer connection and a pool of readers.
package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/sqlstore"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Options tunes the SQLite store.
type Options struct {
	// Synchronous is the synchronous pragma; "" means FULL, which makes
	// every commit durable across power loss.
	Synchronous string
	// CheckpointEvery is how often the checkpointer copies new commits
	// from the WAL into the database file (0: half a second).
	CheckpointEvery time.Duration
}

// Store is the SQLite implementation of store.Store.
type Store struct {
	sqlstore.Reader
	w    *sql.DB
	r    *sql.DB
	path string
	// ws and rs keep the writer's and the readers' prepared statements.
	ws, rs *stmtCache

	// Write transactions go through one committer goroutine, which runs
	// the ones waiting together in a single SQLite transaction (each in its
	// own savepoint) and pays for one fsync: group commit. It also keeps
	// commit and publish in seq order.
	reqs    chan *txReq
	stopped chan struct{}
	done    chan struct{}
	// waiting counts the callers queued for the committer; busy the
	// nanoseconds it has spent committing.
	waiting, busy atomic.Int64

	wmu  sync.Mutex
	hook func([]core.Event)
	// ckpt copies the WAL into the database file beside the committer.
	ckpt *checkpointer
	// observeBatch is told the size of each group commit.
	observeBatch func(n int)

	closeOnce sync.Once
	closeErr  error
}

// txReq is one caller's transaction waiting for the committer.
type txReq struct {
	ctx  context.Context
	fn   func(store.Tx) error
	err  chan error
	evs  []core.Event
	fail error
}

// maxBatch bounds how many transactions share one commit.
const maxBatch = 128

// ErrClosed is returned by Tx after Close.
var ErrClosed = errors.New("store is closed")

var _ store.Store = (*Store)(nil)

// dsn is the driver's name for the database at path.
func dsn(path, syncMode string, readOnly bool) string {
	v := url.Values{}
	v.Add("_pragma", "journal_mode(WAL)")
	v.Add("_pragma", "synchronous("+syncMode+")")
	v.Add("_pragma", "busy_timeout(10000)")
	v.Add("_pragma", "foreign_keys(1)")
	// Each transaction of a group commit runs in its own savepoint, and
	// SQLite keeps the pages a savepoint may have to restore in a
	// statement journal that spills to a temporary file past 64 KiB: two
	// write syscalls per page, 7 % of the server's CPU with 1,000 busy
	// sessions. In memory, it costs at most the batch's pages and is
	// gone at commit; durability rests on the WAL alone either way.
	v.Add("_pragma", "temp_store(MEMORY)")
	if readOnly {
		v.Add("_pragma", "query_only(1)")
		// Readers open after the writer made the file, some only when
		// reads first overlap: one opened after the file was moved away
		// must fail, not create an empty database at the path (its reads
		// answered "no such table", and a restart would have opened it).
		v.Add("mode", "rw")
	} else {
		v.Add("_txlock", "immediate")
		// A group commit dirties more pages than SQLite's default cache
		// (2 MiB) holds: it spilled them into the WAL before the commit
		// and rewrote them there, and read evicted pages back, a fifth of
		// the committer's time with 1,000 busy sessions. 16 MiB holds a
		// batch; readers keep the default, as every commit voids their
		// caches anyway.
		v.Add("_pragma", "cache_size(-16384)")
		v.Add("_pragma", fmt.Sprintf("wal_autocheckpoint(%d)", writerAutoCheckpoint))
	}
	return "file:" + path + "?" + v.Encode()
}

// Open opens (creating if needed) the database at path and applies
// migrations.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create data directory: %w", err)
		}
	}
	syncMode := opts.Synchronous
	if syncMode == "" {
		syncMode = "FULL"
	}
	w, err := sql.Open("sqlite", dsn(path, syncMode, false))
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxIdleTime(0)
	w.SetConnMaxLifetime(0)
	// A database that took a migration has just been written; one that
	// did not is probed, so that one that cannot be written fails here.
	wrote, err := migrate(ctx, w, migrations)
	if err == nil {
		err = refreshStatuses(ctx, w)
	}
	if err == nil && !wrote {
		err = probeWrite(ctx, w, syncMode)
	}
	if err != nil {
		w.Close()
		if err = storageError(err); errors.Is(err, store.ErrStorage) {
			return nil, fmt.Errorf("database %s does not accept writes (is the file, its directory or its disk read-only or full?): %w", path, err)
		}
		return nil, err
	}
	r, err := sql.Open("sqlite", dsn(path, syncMode, true))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open sqlite reader %s: %w", path, err)
	}
	n := max(4, runtime.GOMAXPROCS(0)*2)
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	// The checkpointer's one connection opens now, on this file, and never
	// creates one (mode=rw): opened later, after the file was moved away,
	// it would create an empty database beside the old WAL.
	c, err := sql.Open("sqlite", dsn(path, syncMode, false)+"&mode=rw")
	if err == nil {
		c.SetConnMaxIdleTime(0)
		c.SetConnMaxLifetime(0)
		if err = c.PingContext(ctx); err != nil {
			c.Close()
		}
	}
	if err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("open sqlite checkpointer %s: %w", path, err)
	}
	s := &Store{w: w, r: r, path: path, reqs: make(chan *txReq), stopped: make(chan struct{}), done: make(chan struct{}), ckpt: newCheckpointer(c, opts.CheckpointEvery)}
	s.ws, s.rs = newStmtCache(w, true), newStmtCache(r, false)
	s.Reader = sqlstore.Reader{Q: s.rs.querier(), D: dialect, Memo: &sqlstore.StatusMemo{}}
	go s.committer()
	go s.ckpt.run()
	return s, nil
}

// refreshStatuses rewrites, in one transaction, the stored statuses a
// previous version of the status rule computed (see core.StatusRule).
func refreshStatuses(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	t := &sqlstore.Tx{Reader: sqlstore.Reader{Q: tx, D: dialect}}
	if _, err := t.RefreshStatuses(ctx); err != nil {
		return fmt.Errorf("refresh stored statuses: %w", err)
	}
	return tx.Commit()
}

// probeWrite commits a write that changes nothing, so that a database that
// cannot be written (a read-only file or directory, a full disk) fails
// start-up instead of every write after the server reported healthy; an
// already migrated database is otherwise only read at start. The probe's
// commit is not flushed to the disk (synchronous OFF for it alone): what
// it proves is that the WAL takes a frame, and a flush of a write that
// changes nothing made every restart wait for the disk (4 to 37 ms here,
// more than everything else a restart does).
func probeWrite(ctx context.Context, db *sql.DB, syncMode string) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "PRAGMA synchronous = OFF"); err != nil {
		return err
	}
	err = probeTx(ctx, conn)
	// The connection is the writer's only one: it goes back to the
	// pool with the configured mode, or is discarded.
	if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), "PRAGMA synchronous = "+syncMode); rerr != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		return errors.Join(err, rerr)
	}
	return err
}

func probeTx(ctx context.Context, conn *sql.Conn) error {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var v int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", v)); err != nil {
		return err
	}
	return tx.Commit()
}

// SetCommitHook implements store.Store.
func (s *Store) SetCommitHook(fn func([]core.Event)) {
	s.wmu.Lock()
	s.hook = fn
	s.wmu.Unlock()
}

// Waiting is how many transactions wait for the committer to take them:
// the queue in front of the one writer.
func (s *Store) Waiting() int { return int(s.waiting.Load()) }

// BusySeconds is how long the committer has spent committing: its share
// of the wall clock is how close the write path is to its limit.
func (s *Store) BusySeconds() float64 { return time.Duration(s.busy.Load()).Seconds() }

// SetBatchObserver registers a function told, after each group commit and
// before its callers are answered, how many transactions it committed (for
// the metrics).
func (s *Store) SetBatchObserver(fn func(n int)) {
	s.wmu.Lock()
	s.observeBatch = fn
	s.wmu.Unlock()
}

// Tx implements store.Store. The function runs on the committer goroutine,
// possibly in the same SQLite transaction as other callers' functions, but
// inside its own savepoint: its writes commit or roll back alone.
func (s *Store) Tx(ctx context.Context, fn func(store.Tx) error) error {
	req := &txReq{ctx: ctx, fn: fn, err: make(chan error, 1)}
	s.waiting.Add(1)
	select {
	case s.reqs <- req:
		s.waiting.Add(-1)
	case <-ctx.Done():
		s.waiting.Add(-1)
		return ctx.Err()
	case <-s.stopped:
		s.waiting.Add(-1)
		return ErrClosed
	}
	return storageError(<-req.err)
}

// Classify implements store.Classifier.
func (s *Store) Classify(err error) error { return storageError(err) }

// storageError marks the errors that come from the storage rather than
// from what was written, so that callers can tell a full disk from a bug.
func storageError(err error) error {
	var se *sqlite.Error
	if err == nil || !errors.As(err, &se) {
		return err
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_FULL:
		return fmt.Errorf("%w: %w", store.ErrStorageFull, err)
	case sqlite3.SQLITE_IOERR, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN,
		sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_PERM:
		return fmt.Errorf("%w: %w", store.ErrStorage, err)
	}
	return err
}

func (s *Store) committer() {
	defer close(s.done)
	for {
		var batch []*txReq
		select {
		case req := <-s.reqs:
			batch = append(batch, req)
		case <-s.stopped:
			return
		}
	more:
		for len(batch) < maxBatch {
			select {
			case req := <-s.reqs:
				batch = append(batch, req)
			default:
				break more
			}
		}
		t0 := time.Now()
		s.commitBatch(batch)
		s.ws.prepareNoted(context.Background())
		s.busy.Add(int64(time.Since(t0)))
	}
}

// commitBatch runs a batch in one transaction and answers every caller.
func (s *Store) commitBatch(batch []*txReq) {
	ctx := context.Background()
	finish := func(err error) {
		for _, r := range batch {
			if r.fail != nil {
				r.err <- r.fail
			} else {
				r.err <- err
			}
		}
	}
	sqlTx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		finish(fmt.Errorf("begin: %w", err))
		return
	}
	q := s.ws.tx(sqlTx)
	ok := 0
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.fail = err
			continue
		}
		if _, err := q.ExecContext(ctx, "SAVEPOINT agentd_tx"); err != nil {
			r.fail = fmt.Errorf("savepoint: %w", err)
			continue
		}
		t := &sqlstore.Tx{Reader: sqlstore.Reader{Q: shielded{q}, D: dialect}}
		err := runFn(r.fn, t)
		if err == nil {
			err = t.Seal(ctx)
		}
		if err != nil {
			r.fail = err
			if _, rerr := sqlTx.ExecContext(ctx, "ROLLBACK TO agentd_tx; RELEASE agentd_tx"); rerr != nil {
				// The transaction is in an unknown state (SQLite may have
				// rolled it back itself, as it does on a full disk): give
				// up on all, keeping the first cause.
				_ = sqlTx.Rollback()
				finish(fmt.Errorf("roll back savepoint after %w: %w", err, rerr))
				return
			}
			continue
		}
		if _, err := q.ExecContext(ctx, "RELEASE agentd_tx"); err != nil {
			_ = sqlTx.Rollback()
			finish(fmt.Errorf("release savepoint: %w", err))
			return
		}
		r.evs = t.Appended
		ok++
	}
	if ok == 0 {
		_ = sqlTx.Rollback()
		finish(nil)
		return
	}
	if err := sqlTx.Commit(); err != nil {
		finish(fmt.Errorf("commit: %w", err))
		return
	}
	s.ckpt.committed()
	s.wmu.Lock()
	hook := s.hook
	s.wmu.Unlock()
	if hook != nil {
		var evs []core.Event
		for _, r := range batch {
			if r.fail == nil {
				evs = append(evs, r.evs...)
			}
		}
		if len(evs) > 0 {
			hook(evs)
		}
	}
	// Counted before the callers hear of it, so that a caller reading the
	// metrics after its commit finds it there.
	s.wmu.Lock()
	observe := s.observeBatch
	s.wmu.Unlock()
	if observe != nil {
		observe(ok)
	}
	finish(nil)
}

// shielded runs a caller's statements on the shared transaction with a
// context that cannot be cancelled. The SQLite driver answers a statement
// cancelled while it runs with sqlite3_interrupt, and SQLite then rolls
// back the whole transaction: every other caller's work in the batch. The
// caller's context is checked before each statement instead, so that a
// cancelled caller stops at its next statement and only its own savepoint
// is rolled back.
type shielded struct{ q sqlstore.Querier }

func (s shielded) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.q.ExecContext(context.WithoutCancel(ctx), query, args...)
}

func (s shielded) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.q.QueryContext(context.WithoutCancel(ctx), query, args...)
}

// QueryRowContext cannot report a cancelled context before it runs (a
// sql.Row is made by the driver); the caller's next statement does.
func (s shielded) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return s.q.QueryRowContext(context.WithoutCancel(ctx), query, args...)
}

// runFn runs one caller's function, turning a panic into an error so that
// one bad transaction cannot take the committer (and every writer) down.
func runFn(fn func(store.Tx) error, t store.Tx) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic in transaction: %v", v)
		}
	}()
	return fn(t)
}

// PruneEvents implements store.Store.
func (s *Store) PruneEvents(ctx context.Context, olderThanMS int64, keep int) (int64, error) {
	// Most passes find nothing to delete; they are answered by a read
	// instead of a commit (an fsync, and a write in every turn's count).
	var oldest sql.NullInt64
	var over bool
	err := s.r.QueryRowContext(ctx, `SELECT (SELECT time_ms FROM events ORDER BY seq LIMIT 1),
		EXISTS (SELECT 1 FROM events ORDER BY seq DESC LIMIT 1 OFFSET ?)`, max(keep, 0)).Scan(&oldest, &over)
	if err != nil {
		return 0, fmt.Errorf("prune events: %w", err)
	}
	if !(olderThanMS > 0 && oldest.Valid && oldest.Int64 < olderThanMS) && !(keep > 0 && over) {
		return 0, nil
	}
	var total int64
	err = s.Tx(ctx, func(t store.Tx) error {
		tx := t.(*sqlstore.Tx)
		if olderThanMS > 0 {
			res, err := tx.Q.ExecContext(ctx, `DELETE FROM events WHERE seq < COALESCE(
				(SELECT seq FROM events WHERE time_ms >= ? ORDER BY seq LIMIT 1),
				(SELECT MAX(seq) + 1 FROM events))`, olderThanMS)
			if err != nil {
				return fmt.Errorf("prune events by age: %w", err)
			}
			n, _ := res.RowsAffected()
			total += n
		}
		if keep > 0 {
			res, err := tx.Q.ExecContext(ctx, `DELETE FROM events WHERE seq <= (SELECT seq FROM events ORDER BY seq DESC LIMIT 1 OFFSET ?)`, keep)
			if err != nil {
				return fmt.Errorf("prune events by count: %w", err)
			}
			n, _ := res.RowsAffected()
			total += n
		}
		return nil
	})
	return total, err
}

// IntegrityCheck runs PRAGMA integrity_check and returns its verdict.
func (s *Store) IntegrityCheck(ctx context.Context) (string, error) {
	var res string
	err := s.w.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&res)
	return res, err
}

// Close implements store.Store. It checkpoints the WAL so the database file
// is complete on its own.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.stopped)
		<-s.done
		ckptErr := s.ckpt.close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.rs.close()
		s.ws.close()
		_, _ = s.w.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)")
		s.closeErr = errors.Join(ckptErr, s.r.Close(), s.w.Close())
	})
	return s.closeErr
}

var dialect = &sqlstore.Dialect{
	StatusColumn: true,
	IsConflict: func(err error) bool {
		var se *sqlite.Error
		if errors.As(err, &se) {
			code := se.Code()
			return code == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY || code == sqlite3.SQLITE_CONSTRAINT_UNIQUE
		}
		return false
	},
	AppendEvents: appendEvents,
	LastSeq: func(ctx context.Context, q sqlstore.Querier) (int64, error) {
		var seq sql.NullInt64
		err := q.QueryRowContext(ctx, `SELECT seq FROM sqlite_sequence WHERE name = 'events'`).Scan(&seq)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, nil
		}
		return seq.Int64, err
	},
}
