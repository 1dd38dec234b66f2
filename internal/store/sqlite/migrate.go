package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"

	"github.com/agentd/agentd/internal/store/sqlstore"
)

// migrate applies every migration file of fsys the database has not
// applied, in order of number, whatever the numbers it applied before
// (see sqlstore.MigrationsTable), and reports whether it wrote. The
// schema version (user_version) stays the newest number applied.
//
// The pending migrations go in one transaction: a new database costs one
// commit (its fsync is milliseconds of a cold start) rather than one per
// migration, and an upgrade applies wholly or not at all.
func migrate(ctx context.Context, db *sql.DB, fsys fs.FS) (wrote bool, err error) {
	var version, recorded int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return false, fmt.Errorf("read schema version: %w", err)
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'agentd_migrations'`).Scan(&recorded); err != nil {
		return false, fmt.Errorf("read schema version: %w", err)
	}
	files, err := sqlstore.ReadMigrations(fsys, "migrations")
	if err != nil {
		return false, err
	}
	plan, err := sqlstore.PlanMigrations(ctx, db, files, version, recorded > 0)
	if err != nil {
		return false, err
	}
	if recorded > 0 && len(plan.Pending) == 0 {
		return false, nil
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback()
	if err := dialect.RecordMigrations(ctx, tx, plan.Seed...); err != nil {
		return false, err
	}
	for _, m := range plan.Pending {
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return false, fmt.Errorf("migration %d: %w", m.N, err)
		}
		if err := dialect.RecordMigrations(ctx, tx, m.N); err != nil {
			return false, err
		}
		version = max(version, m.N)
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", version)); err != nil {
		return false, fmt.Errorf("migrate: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("migrations to %d: %w", version, err)
	}
	return true, nil
}
