package sqlite

import (
	"context"
	"database/sql"
	"strings"
	"sync"

	"github.com/agentd/agentd/internal/store/sqlstore"
)

// maxCachedStmts bounds the cache; agentd's statements are a fixed set of
// a few dozen texts, so a text beyond the bound is one built at run time
// and is better not kept.
const maxCachedStmts = 256

// stmtCache prepares each statement text once per database handle.
// database/sql does not keep prepared statements between calls, and the
// SQLite driver parses every text anew: in the 1,000-session profile (issue
// 16) parsing cost more CPU than running the statements. A *sql.Stmt keeps
// its preparation per connection, so both the reader pool and the single
// writer connection reuse it.
//
// The writer's one connection is held by the transaction that runs the
// statement, so a statement cannot be prepared on the handle then; it is
// noted and prepared by the committer between batches (prepareNoted).
type stmtCache struct {
	db *sql.DB
	// lazy: statements are only noted by get, never prepared there.
	lazy  bool
	mu    sync.RWMutex
	m     map[string]*sql.Stmt
	noted map[string]struct{}
}

func newStmtCache(db *sql.DB, lazy bool) *stmtCache {
	return &stmtCache{db: db, lazy: lazy, m: make(map[string]*sql.Stmt), noted: make(map[string]struct{})}
}

// get returns the prepared statement for query, or nil when it is not (or
// not yet) cached: several statements in one text, a full cache, a failed
// preparation (which the uncached call then reports), or a lazy cache.
func (c *stmtCache) get(ctx context.Context, query string) *sql.Stmt {
	c.mu.RLock()
	s, ok := c.m[query]
	c.mu.RUnlock()
	if ok {
		return s
	}
	if strings.Contains(strings.TrimRight(strings.TrimSpace(query), ";"), ";") {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.m[query]; ok {
		return s
	}
	if len(c.m)+len(c.noted) >= maxCachedStmts {
		return nil
	}
	if c.lazy {
		c.noted[query] = struct{}{}
		return nil
	}
	s, err := c.db.PrepareContext(context.WithoutCancel(ctx), query)
	if err != nil {
		return nil
	}
	c.m[query] = s
	return s
}

// prepareNoted prepares the statements a lazy cache noted. It must run
// while no transaction holds the handle's connection.
func (c *stmtCache) prepareNoted(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for q := range c.noted {
		delete(c.noted, q)
		if s, err := c.db.PrepareContext(ctx, q); err == nil {
			c.m[q] = s
		}
	}
}

// close closes every cached statement.
func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, s := range c.m {
		_ = s.Close()
		delete(c.m, q)
	}
}

// querier returns a querier on the whole handle (the reader pool) through the
// cache.
func (c *stmtCache) querier() sqlstore.Querier { return cachedDB{c} }

// tx returns a querier on one of the handle's transactions through the
// cache.
func (c *stmtCache) tx(tx *sql.Tx) sqlstore.Querier { return cachedTx{c, tx} }

type cachedDB struct{ c *stmtCache }

func (q cachedDB) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if s := q.c.get(ctx, query); s != nil {
		return s.ExecContext(ctx, args...)
	}
	return q.c.db.ExecContext(ctx, query, args...)
}

func (q cachedDB) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if s := q.c.get(ctx, query); s != nil {
		return s.QueryContext(ctx, args...)
	}
	return q.c.db.QueryContext(ctx, query, args...)
}

func (q cachedDB) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if s := q.c.get(ctx, query); s != nil {
		return s.QueryRowContext(ctx, args...)
	}
	return q.c.db.QueryRowContext(ctx, query, args...)
}

type cachedTx struct {
	c  *stmtCache
	tx *sql.Tx
}

func (q cachedTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if s := q.c.get(ctx, query); s != nil {
		return q.tx.StmtContext(ctx, s).ExecContext(ctx, args...)
	}
	return q.tx.ExecContext(ctx, query, args...)
}

func (q cachedTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if s := q.c.get(ctx, query); s != nil {
		return q.tx.StmtContext(ctx, s).QueryContext(ctx, args...)
	}
	return q.tx.QueryContext(ctx, query, args...)
}

func (q cachedTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if s := q.c.get(ctx, query); s != nil {
		return q.tx.StmtContext(ctx, s).QueryRowContext(ctx, args...)
	}
	return q.tx.QueryRowContext(ctx, query, args...)
}
