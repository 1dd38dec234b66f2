package sqlite_test

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/agentd/agentd/internal/store/sqlite"
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

// TestMigrationsArriveOutOfOrder: branches number their migrations apart
// and merge in any order, so a database that took 0003 may meet 0002
// later; it takes it then, and applies nothing twice. A database from
// before the record was kept (numbers without gaps) is taken as having
// every file up to its version.
func TestMigrationsArriveOutOfOrder(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "m.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	has := func(table string) bool {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name = ?`, table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	// A database of the old kind: 0001 applied, version 1, no record.
	if _, err := db.Exec(`CREATE TABLE t0001 (x INTEGER); PRAGMA user_version = 1`); err != nil {
		t.Fatal(err)
	}
	if wrote, err := sqlite.Migrate(ctx, db, migrationFiles("0001", "0003")); err != nil || !wrote {
		t.Fatalf("0001 and 0003 over version 1: wrote %t, %v", wrote, err)
	}
	if !has("t0003") || has("t0002") {
		t.Fatal("0003 not applied")
	}
	if wrote, err := sqlite.Migrate(ctx, db, migrationFiles("0001", "0002", "0003")); err != nil || !wrote || !has("t0002") {
		t.Fatalf("0002 after 0003: wrote %t, %v", wrote, err)
	}
	if wrote, err := sqlite.Migrate(ctx, db, migrationFiles("0001", "0002", "0003")); err != nil || wrote {
		t.Fatalf("nothing pending: wrote %t, %v", wrote, err)
	}
	var version int
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&version); err != nil || version != 3 {
		t.Fatalf("schema version %d, %v; want 3", version, err)
	}
	// An agentd that lacks a migration the database took is older.
	if _, err := sqlite.Migrate(ctx, db, migrationFiles("0001", "0003")); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("a database with a migration this agentd lacks: %v", err)
	}
}
