package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/postgres"
	"github.com/agentd/agentd/internal/store/postgres/pgtest"
	"github.com/agentd/agentd/internal/store/storetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func open(t *testing.T, url string) *postgres.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := postgres.Open(ctx, url, postgres.Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	pgtest.URL(t)
	storetest.Exercise(t, func(t *testing.T) (store.Store, func() store.Store) {
		url := pgtest.Schema(t)
		return open(t, url), func() store.Store { return open(t, url) }
	})
}
