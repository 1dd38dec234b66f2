package postgres_test

import (
	"database/sql"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/agentd/agentd/internal/store/postgres"
	"github.com/agentd/agentd/internal/store/postgres/pgtest"
)

// migrationFiles returns numbered files that each create a table t<N>: a
// file applied twice fails.
func migrationFiles(ns ...string) fstest.MapFS {
	fs := fstest.MapFS{}
	for _, n := range ns {
		fs["migrations/"+n+"_x.sql"] = &fstest.MapFile{Data: []byte("CREATE TABLE t" + n + " (x INTEGER);")}
	}
	return fs
}

// TestMigrationsArriveOutOfOrder: a schema that took 0003 before 0002
// existed takes 0002 when it arrives, and applies nothing twice; a schema
// from before the record was kept has every file up to its version.
func TestMigrationsArriveOutOfOrder(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, err := sql.Open("pgx", pgtest.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var schema string
	if err := db.QueryRow(`SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	has := func(table string) bool {
		var ok bool
		if err := db.QueryRow(`SELECT to_regclass($1) IS NOT NULL`, table).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	// A schema of the old kind: 0001 applied, version 1, no record.
	for _, q := range []string{`CREATE TABLE t0001 (x INTEGER)`, `CREATE TABLE agentd_schema (version INTEGER NOT NULL)`,
		`INSERT INTO agentd_schema VALUES (1)`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if err := postgres.Migrate(ctx, db, schema, migrationFiles("0001", "0003")); err != nil || !has("t0003") || has("t0002") {
		t.Fatalf("0001 and 0003 over version 1: %v", err)
	}
	for range 2 {
		if err := postgres.Migrate(ctx, db, schema, migrationFiles("0001", "0002", "0003")); err != nil || !has("t0002") {
			t.Fatalf("0002 after 0003: %v", err)
		}
	}
	var version int
	if err := db.QueryRow(`SELECT version FROM agentd_schema`).Scan(&version); err != nil || version != 3 {
		t.Fatalf("schema version %d, %v; want 3", version, err)
	}
	if err := postgres.Migrate(ctx, db, schema, migrationFiles("0001", "0003")); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("a schema with a migration this agentd lacks: %v", err)
	}
}
