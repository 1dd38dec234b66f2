// Package pgtest gives each test its own PostgreSQL schema on the server
// named by AGENTD_TEST_POSTGRES, so that tests run in parallel against one
// real server without seeing each other's rows.
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/testenv"
	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
)

// Env names the variable that holds the test server's URL.
const Env = "AGENTD_TEST_POSTGRES"

// URL returns the server's URL, or skips the test when none is given.
func URL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(Env)
	if u == "" {
		testenv.Skip(t, testenv.Postgres, "no PostgreSQL to test against")
	}
	return u
}

// Schema creates a fresh schema, drops it when the test ends, and returns
// a URL whose connections use it.
func Schema(t testing.TB) string {
	t.Helper()
	base := URL(t)
	b := make([]byte, 6)
	rand.Read(b)
	name := "t_" + hex.EncodeToString(b)
	db, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, "CREATE SCHEMA "+pgx.Identifier{name}.Sanitize()); err != nil {
		db.Close()
		t.Fatalf("create test schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = db.ExecContext(ctx, "DROP SCHEMA "+pgx.Identifier{name}.Sanitize()+" CASCADE")
		db.Close()
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String()
}
