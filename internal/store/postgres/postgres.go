// Package postgres is the store driver for several nodes sharing one
// PostgreSQL database. It shares its SQL with the SQLite driver
// (sqlstore) and adds what sharing needs: a dense event log whose order is
// assigned after commit, so that transactions commit in parallel, and that
// every node reads (tail.go), a wake-up channel between nodes
// (LISTEN/NOTIFY, never the payload), run leases with fencing
// (lease.go), and the credentials clients store, which every node shares
// (credentials.go).
package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/sqlstore"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Options tunes the PostgreSQL store.
type Options struct {
	// Node is this node's id in leases; a random one when empty.
	Node string
	// MaxConns bounds the connection pool; default 16.
	MaxConns int
	// Poll is how often the event log is read when no wake-up arrives;
	// default 1 s.
	Poll   time.Duration
	Logger *slog.Logger
	// PresenceGrace is how long this node's own connection must have been
	// visible before it takes the runs of nodes that are no longer
	// connected, without waiting for their leases to expire (liveness.go);
	// default 10 s, negative to wait for the leases' TTL always.
	PresenceGrace time.Duration
}

// Store is the PostgreSQL implementation of store.Store and store.Leaser.
type Store struct {
	sqlstore.Reader
	db      *sql.DB
	connCfg *pgx.ConnConfig
	node    string
	// appPrefix and app name this node's listening connection; claimable
	// is the condition under which a run may be claimed (lease.go);
	// stopped, under which its previous owner stopped (liveness.go).
	appPrefix, app, claimable, stopped string
	channel                            string // LISTEN/NOTIFY channel of this database and schema
	// listening is closed once the listening connection, the node's
	// presence, is first up.
	listening  chan struct{}
	listenOnce sync.Once
	poll       time.Duration
	log        *slog.Logger

	d      *sqlstore.Dialect // dialect, appending with this process's origin
	origin string

	hookMu  sync.Mutex
	hook    func([]core.Event)
	abortFn func(runID string, reason core.EndReason)

	tail      tailer
	creds     credsWatch // under hookMu, but its loop's own fields
	stop      context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

var _ store.Store = (*Store)(nil)
var _ store.Leaser = (*Store)(nil)

// ErrClosed is returned by Tx after Close.
var ErrClosed = errors.New("store is closed")

// Open connects to the database at url (postgres://…), applies migrations
// under an advisory lock (nodes starting together migrate once) and starts
// following the event log.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = 16
	}
	if opts.Poll <= 0 {
		opts.Poll = time.Second
	}
	if opts.Node == "" {
		opts.Node = core.NewID("node", false)
	}
	if opts.PresenceGrace == 0 {
		opts.PresenceGrace = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(opts.MaxConns)
	db.SetMaxIdleConns(opts.MaxConns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	var schema string
	var openedMS int64 // on the database's clock, as leases are
	if err := db.QueryRowContext(ctx, `SELECT current_schema(), `+nowMS).Scan(&schema, &openedMS); err != nil {
		db.Close()
		return nil, fmt.Errorf("connect to postgres: %w", storageError(err))
	}
	if err := migrate(ctx, db, schema, migrations); err != nil {
		db.Close()
		return nil, storageError(err)
	}
	s := &Store{
		db: db, connCfg: cfg, node: opts.Node, poll: opts.Poll,
		channel:   "agentd_" + schema,
		log:       opts.Logger.With("component", "postgres"),
		listening: make(chan struct{}),
	}
	s.appPrefix = appPrefix(schema)
	s.app = appName(s.appPrefix, s.node)
	s.claimable = `state IN ('queued', 'running', 'retrying') AND (lease_epoch = 0 OR lease_expires_ms <= ` + nowMS +
		` OR ` + ownerGone(s.appPrefix, s.app, opts.PresenceGrace) + `)`
	s.stopped = ownerStopped(s.appPrefix, s.node, openedMS, opts.PresenceGrace, "$3")
	// This process's events carry its origin into the log, so that the
	// tail can tell which of them it committed (Committed).
	s.origin = core.NewID("origin", false)
	d := *dialect
	d.AppendEvents = func(ctx context.Context, q sqlstore.Querier, evs []core.Event) error {
		return appendEvents(ctx, q, evs, s.origin)
	}
	s.d = &d
	s.Reader = sqlstore.Reader{Q: db, D: s.d}
	last, err := dialect.LastSeq(ctx, db)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("read event head: %w", storageError(err))
	}
	s.tail.init(last)
	s.startLoops(ctx)
	// Leases taken before the node's presence is visible would look like a
	// dead node's to the others.
	wait := time.NewTimer(5 * time.Second)
	defer wait.Stop()
	select {
	case <-s.listening:
	case <-wait.C:
		s.log.Warn("the listening connection is not up yet; other nodes may take this node's runs until it is")
	case <-ctx.Done():
		s.Close()
		return nil, ctx.Err()
	}
	return s, nil
}

// startLoops starts the store's goroutines, which Close stops: the tail,
// the listener, the notice sender and the credential watchers' loop.
func (s *Store) startLoops(ctx context.Context) {
	s.creds.kick = make(chan struct{}, 1)
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.stop = cancel
	s.wg.Add(4)
	go s.tailLoop(runCtx)
	go s.listenLoop(runCtx)
	go s.notifyLoop(runCtx)
	go s.credsLoop(runCtx)
}

// Node implements store.Leaser.
func (s *Store) Node() string { return s.node }

// migrationLock names the advisory lock under which one schema migrates.
func migrationLock(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("agentd migrate " + schema))
	return int64(h.Sum64())
}

func migrate(ctx context.Context, db *sql.DB, schema string, fsys fs.FS) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer conn.Close()
	// A session-level lock on one connection: a second node starting at
	// the same moment waits here, then finds the schema current.
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, migrationLock(schema)); err != nil {
		return fmt.Errorf("take migration lock: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, migrationLock(schema))
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS agentd_schema (version INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("create schema table: %w", err)
	}
	var version int
	err = conn.QueryRowContext(ctx, `SELECT version FROM agentd_schema`).Scan(&version)
	if errors.Is(err, sql.ErrNoRows) {
		if _, err := conn.ExecContext(ctx, `INSERT INTO agentd_schema (version) VALUES (0)`); err != nil {
			return fmt.Errorf("init schema version: %w", err)
		}
	} else if err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	return applyMigrations(ctx, conn, fsys, version)
}

// applyMigrations applies every migration file of fsys the schema has not
// applied, each in its own transaction, in order of number, whatever the
// numbers it applied before (see sqlstore.MigrationsTable); agentd_schema
// keeps the newest number applied.
func applyMigrations(ctx context.Context, conn *sql.Conn, fsys fs.FS, version int) error {
	var recorded bool
	if err := conn.QueryRowContext(ctx, `SELECT to_regclass('agentd_migrations') IS NOT NULL`).Scan(&recorded); err != nil {
		return fmt.Errorf("read applied migrations: %w", err)
	}
	files, err := sqlstore.ReadMigrations(fsys, "migrations")
	if err != nil {
		return err
	}
	plan, err := sqlstore.PlanMigrations(ctx, conn, files, version, recorded)
	if err != nil {
		return err
	}
	if !recorded {
		// The record and its seed in one transaction: a record without
		// its seed would have every migration applied again.
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("record migrations: %w", err)
		}
		if err := dialect.RecordMigrations(ctx, tx, plan.Seed...); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("record migrations: %w", err)
		}
	}
	for _, m := range plan.Pending {
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("migration %d: %w", m.N, err)
		}
		version = max(version, m.N)
		if err := applyOne(ctx, tx, m, version); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("migration %d: %w", m.N, err)
		}
	}
	return nil
}

func applyOne(ctx context.Context, tx *sql.Tx, m sqlstore.Migration, version int) error {
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return fmt.Errorf("migration %d: %w", m.N, err)
	}
	if err := dialect.RecordMigrations(ctx, tx, m.N); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE agentd_schema SET version = $1`, version); err != nil {
		return fmt.Errorf("migration %d: %w", m.N, err)
	}
	return nil
}

// SetCommitHook implements store.Store. The hook receives the log as it
// grows, in seq order and without holes, whichever node wrote it.
func (s *Store) SetCommitHook(fn func([]core.Event)) {
	s.hookMu.Lock()
	s.hook = fn
	s.hookMu.Unlock()
}

// Tx implements store.Store. Each call is its own PostgreSQL transaction
// (read committed); transactions that touch the same session serialise on
// its row (LockSession); those that append events share no lock: their
// events are numbered after they commit (tail.go), and Tx returns once
// the commit hook has received them. Under a lease (WithLease) the
// transaction first checks, and holds until commit, that the lease is
// still this node's. A deadlock or serialisation failure is retried.
func (s *Store) Tx(ctx context.Context, fn func(store.Tx) error) error {
	for attempt := 1; ; attempt++ {
		appended, err := s.tx(ctx, fn)
		if err == nil {
			if appended {
				// A tail cycle that starts from here on finds the events
				// committed: it numbers them or sees them numbered.
				cycle := s.tail.next()
				s.kickTail()
				return s.tail.wait(ctx, cycle)
			}
			return nil
		}
		if retryable(err) && attempt < 5 && ctx.Err() == nil {
			continue
		}
		return storageError(err)
	}
}

func (s *Store) tx(ctx context.Context, fn func(store.Tx) error) (bool, error) {
	if s.tail.closed() {
		return false, ErrClosed
	}
	sqlTx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("begin: %w", err)
	}
	defer sqlTx.Rollback()
	if l := store.LeaseFrom(ctx); l != nil {
		if err := fence(ctx, sqlTx, l); err != nil {
			return false, err
		}
	}
	t := &sqlstore.Tx{Reader: sqlstore.Reader{Q: sqlTx, D: s.d}}
	if err := runFn(fn, t); err != nil {
		return false, err
	}
	if err := t.Seal(ctx); err != nil {
		return false, err
	}
	if beforeCommit != nil {
		beforeCommit()
	}
	if err := sqlTx.Commit(); err != nil {
		return false, fmt.Errorf("commit: %w", err)
	}
	return len(t.Appended) > 0, nil
}

// beforeCommit, set by tests only, runs between a transaction's last
// statement and its commit: it lets transactions commit in another order
// than the one they wrote their events in.
var beforeCommit func()

// fence checks that the lease is held and unexpired, and keeps the run's
// row share-locked until commit so that no claim slips in between.
func fence(ctx context.Context, tx *sql.Tx, l *store.Lease) error {
	var one int
	err := tx.QueryRowContext(ctx, `SELECT 1 FROM runs WHERE id = $1 AND lease_owner = $2 AND lease_epoch = $3
		AND lease_expires_ms > `+nowMS+` FOR SHARE`, l.RunID, l.Owner, l.Epoch).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		if l.Lost != nil {
			l.Lost()
		}
		return fmt.Errorf("run %s epoch %d: %w", l.RunID, l.Epoch, store.ErrFenced)
	}
	if err != nil {
		return fmt.Errorf("check lease of run %s: %w", l.RunID, err)
	}
	return nil
}

// runFn runs one caller's function, turning a panic into an error.
func runFn(fn func(store.Tx) error, t store.Tx) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic in transaction: %v", v)
		}
	}()
	return fn(t)
}

// retryable reports a failure that says nothing about the transaction
// itself: PostgreSQL chose it as a deadlock victim or could not serialise it.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001")
}

// Classify implements store.Classifier.
func (s *Store) Classify(err error) error { return storageError(err) }

// storageError marks the failures that come from the database server or
// the way to it rather than from what was written, so that runs pause and
// retry (a restart of PostgreSQL, a full disk) instead of failing.
func storageError(err error) error {
	if err == nil || errors.Is(err, store.ErrStorage) || errors.Is(err, store.ErrFenced) {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "53100":
			return fmt.Errorf("%w: %w", store.ErrStorageFull, err)
		case strings.HasPrefix(pe.Code, "53"), strings.HasPrefix(pe.Code, "08"),
			strings.HasPrefix(pe.Code, "57P"), pe.Code == "25006", strings.HasPrefix(pe.Code, "58"):
			return fmt.Errorf("%w: %w", store.ErrStorage, err)
		}
		return err
	}
	var ne net.Error
	var ce *pgconn.ConnectError
	if errors.As(err, &ne) || errors.As(err, &ce) || errors.Is(err, sql.ErrConnDone) ||
		errors.Is(err, driver.ErrBadConn) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) {
		return fmt.Errorf("%w: %w", store.ErrStorage, err)
	}
	if strings.Contains(err.Error(), "conn closed") || strings.Contains(err.Error(), "unexpected EOF") {
		return fmt.Errorf("%w: %w", store.ErrStorage, err)
	}
	return err
}

// PruneEvents implements store.Store.
func (s *Store) PruneEvents(ctx context.Context, olderThanMS int64, keep int) (int64, error) {
	var total int64
	if olderThanMS > 0 {
		res, err := s.db.ExecContext(ctx, `DELETE FROM events WHERE seq < COALESCE(
			(SELECT seq FROM events WHERE time_ms >= $1 ORDER BY seq LIMIT 1),
			(SELECT MAX(seq) + 1 FROM events))`, olderThanMS)
		if err != nil {
			return 0, fmt.Errorf("prune events by age: %w", storageError(err))
		}
		n, _ := res.RowsAffected()
		total += n
	}
	if keep > 0 {
		res, err := s.db.ExecContext(ctx, `DELETE FROM events WHERE seq <= (SELECT seq FROM event_head) - $1`, keep)
		if err != nil {
			return total, fmt.Errorf("prune events by count: %w", storageError(err))
		}
		n, _ := res.RowsAffected()
		total += n
	}
	return total, nil
}

// Close implements store.Store. It is safe to call more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.tail.close()
		s.stop()
		s.wg.Wait()
		s.closeErr = s.db.Close()
	})
	return s.closeErr
}

// nowMS is the database's clock in epoch milliseconds: lease times are
// compared on one clock, whatever the nodes' clocks say.
const nowMS = `(extract(epoch from clock_timestamp()) * 1000)::bigint`

var dialect = &sqlstore.Dialect{
	Dollar: true,
	IsConflict: func(err error) bool {
		var pe *pgconn.PgError
		return errors.As(err, &pe) && pe.Code == "23505"
	},
	// AppendEvents is set per store (appendEvents with its origin).
	LockSession: func(ctx context.Context, q sqlstore.Querier, id string) error {
		var one int
		err := q.QueryRowContext(ctx, `SELECT 1 FROM sessions WHERE id = $1 FOR NO KEY UPDATE`, id).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		return err
	},
	// A run whose owner stopped renewing its lease is being recovered, by
	// whichever node claims it first: it is busy, never idle, and says so.
	// A run parked paused (no owner, Park) is not: it waits as it was written.
	RunData: `CASE WHEN lease_epoch > 0 AND lease_owner <> '' AND lease_expires_ms <= ` + nowMS + ` AND state IN ('running', 'retrying')
		THEN jsonb_set(jsonb_set(data::jsonb, '{phase}', '"recovering"'), '{state}', '"running"')::text ELSE data END`,
	LastSeq: func(ctx context.Context, q sqlstore.Querier) (int64, error) {
		var seq int64
		err := q.QueryRowContext(ctx, `SELECT seq FROM event_head`).Scan(&seq)
		return seq, err
	},
}

// appendEvents inserts a transaction's events into the inbox, under its
// transaction's id and the committing process's origin, until a sequencer
// pass numbers them after the commit (tail.go): no lock is shared with
// other transactions. Their seq is not known here; the commit hook
// receives them numbered.
func appendEvents(ctx context.Context, q sqlstore.Querier, evs []core.Event, origin string) error {
	n := len(evs)
	sids, types, data := make([]string, n), make([]string, n), make([]string, n)
	times := make([]int64, n)
	for i := range evs {
		ev := &evs[i]
		sids[i], types[i], times[i], data[i] = ev.SessionID, ev.Type, ev.Time, string(ev.Properties)
	}
	_, err := q.ExecContext(ctx, `INSERT INTO event_inbox (xid, ord, session_id, type, time_ms, data, origin)
		SELECT pg_current_xact_id(), v.ord, v.sid, v.type, v.t, v.data, $5
		FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[]) WITH ORDINALITY AS v(sid, type, t, data, ord)`,
		sids, types, times, data, origin)
	return err
}
