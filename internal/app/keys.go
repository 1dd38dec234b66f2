package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/agentd/agentd/internal/access"
	"github.com/agentd/agentd/internal/lockfile"
	"github.com/agentd/agentd/internal/store/postgres"
	"github.com/agentd/agentd/internal/store/sqlite"
)

// OpenKeys opens a database's API keys without starting a node (agentd
// key --db): a SQLite database only while no server holds it (its lock
// says which), a PostgreSQL one at any time, whose nodes see a change
// within access.Staleness. close releases the database.
func OpenKeys(ctx context.Context, db string, log *slog.Logger) (keys *access.Keys, close func() error, err error) {
	if IsPostgres(db) {
		pg, err := postgres.Open(ctx, db, postgres.Options{Logger: log, MaxConns: 2})
		if err != nil {
			return nil, nil, fmt.Errorf("open postgres: %w", err)
		}
		return access.New(pg), pg.Close, nil
	}
	if err := os.MkdirAll(filepath.Dir(db), 0o700); err != nil {
		return nil, nil, fmt.Errorf("create data directory: %w", err)
	}
	lock, err := lockfile.Acquire(db)
	if errors.Is(err, lockfile.ErrHeld) {
		return nil, nil, fmt.Errorf("database %s is in use by a running server (%w): leave out --db to go through its API", db, err)
	}
	if err != nil {
		return nil, nil, err
	}
	st, err := sqlite.Open(ctx, lock.Path(), sqlite.Options{})
	if err != nil {
		lock.Release()
		return nil, nil, err
	}
	return access.New(st), func() error {
		err := st.Close()
		lock.Release()
		return err
	}, nil
}
