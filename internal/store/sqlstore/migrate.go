package sqlstore

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Migration is one schema file, NNNN_name.sql: its number and its SQL.
type Migration struct {
	N    int
	Name string
	SQL  string
}

// ReadMigrations returns the .sql files of dir in fsys, by number.
func ReadMigrations(fsys fs.FS, dir string) ([]Migration, error) {
	names, err := fs.Glob(fsys, path.Join(dir, "*.sql"))
	if err != nil {
		return nil, err
	}
	out := make([]Migration, 0, len(names))
	for _, name := range names {
		n, err := strconv.Atoi(strings.SplitN(path.Base(name), "_", 2)[0])
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("migration %s: bad name", name)
		}
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{N: n, Name: path.Base(name), SQL: string(body)})
	}
	slices.SortFunc(out, func(a, b Migration) int { return a.N - b.N })
	for i := 1; i < len(out); i++ {
		if out[i].N == out[i-1].N {
			return nil, fmt.Errorf("migrations %s and %s share a number", out[i-1].Name, out[i].Name)
		}
	}
	return out, nil
}

// MigrationsTable records each migration a database applied. Branches
// number their migrations apart and merge in any order, so a database may
// have taken 0014 before 0013 existed: the newest number alone cannot say
// what is missing, the record can.
const MigrationsTable = `CREATE TABLE IF NOT EXISTS agentd_migrations (version INTEGER PRIMARY KEY)`

// MigrationPlan is what a database lacks: the numbers to record as
// already applied (Seed) and the files to apply, in order (Pending).
type MigrationPlan struct {
	Seed    []int
	Pending []Migration
}

// PlanMigrations compares the files with what the database applied.
// version is the driver's schema version (the newest number applied);
// recorded says whether agentd_migrations exists. A database without the
// record predates it, when numbers had no gaps: every file up to version
// was applied, and those go in Seed. A database that applied a migration
// this agentd lacks is refused: it is newer than this agentd.
func PlanMigrations(ctx context.Context, q Querier, files []Migration, version int, recorded bool) (MigrationPlan, error) {
	var plan MigrationPlan
	applied := map[int]bool{}
	if recorded {
		rows, err := q.QueryContext(ctx, `SELECT version FROM agentd_migrations`)
		if err != nil {
			return plan, fmt.Errorf("read applied migrations: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var n int
			if err := rows.Scan(&n); err != nil {
				return plan, fmt.Errorf("read applied migrations: %w", err)
			}
			applied[n] = true
		}
		if err := rows.Err(); err != nil {
			return plan, fmt.Errorf("read applied migrations: %w", err)
		}
	} else {
		for _, m := range files {
			if m.N <= version {
				applied[m.N] = true
				plan.Seed = append(plan.Seed, m.N)
			}
		}
	}
	known := map[int]bool{}
	for _, m := range files {
		known[m.N] = true
		if !applied[m.N] {
			plan.Pending = append(plan.Pending, m)
		}
	}
	newest := 0
	if len(files) > 0 {
		newest = files[len(files)-1].N
	}
	if !recorded && version > newest {
		return plan, fmt.Errorf("database schema version %d is newer than this agentd (%d)", version, newest)
	}
	for n := range applied {
		if !known[n] {
			return plan, fmt.Errorf("database applied migration %d, which this agentd lacks: it is newer than this agentd", n)
		}
	}
	return plan, nil
}

// RecordMigrations creates the record when absent and adds the numbers
// to it.
func (d *Dialect) RecordMigrations(ctx context.Context, q Querier, ns ...int) error {
	if _, err := q.ExecContext(ctx, MigrationsTable); err != nil {
		return fmt.Errorf("create migrations record: %w", err)
	}
	for _, n := range ns {
		if _, err := q.ExecContext(ctx, d.rebind(`INSERT INTO agentd_migrations (version) VALUES (?)`), n); err != nil {
			return fmt.Errorf("record migration %d: %w", n, err)
		}
	}
	return nil
}
