package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"time"
)

// CommitCeiling measures, for about d, how many single-row transactions a
// database in dir commits per second with the settings the store uses
// (WAL, synchronous=FULL, one writer): the disk's limit, which group
// commit lets agentd share among transactions but not exceed in commits.
func CommitCeiling(ctx context.Context, dir string, d time.Duration) (float64, error) {
	f, err := os.CreateTemp(dir, "ceiling-*.db")
	if err != nil {
		return 0, err
	}
	path := f.Name()
	f.Close()
	defer func() {
		for _, suffix := range []string{"", "-wal", "-shm"} {
			os.Remove(path + suffix)
		}
	}()
	db, err := sql.Open("sqlite", dsn(path, "FULL", false))
	if err != nil {
		return 0, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, `CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)`); err != nil {
		return 0, fmt.Errorf("commit ceiling: %w", err)
	}
	ins, err := db.PrepareContext(ctx, `INSERT INTO t (v) VALUES (?)`)
	if err != nil {
		return 0, fmt.Errorf("commit ceiling: %w", err)
	}
	defer ins.Close()
	n := 0
	start := time.Now()
	for time.Since(start) < d {
		if _, err := ins.ExecContext(ctx, "a row of about the size of a small part"); err != nil {
			return 0, fmt.Errorf("commit ceiling: %w", err)
		}
		n++
	}
	return float64(n) / time.Since(start).Seconds(), nil
}
