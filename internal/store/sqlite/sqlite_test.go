package sqlite_test

import (
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/sqlite"
	"github.com/agentd/agentd/internal/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, func(t *testing.T) (store.Store, func() store.Store) {
		path := filepath.Join(t.TempDir(), "agentd.db")
		open := func() store.Store {
			s, err := sqlite.Open(t.Context(), path, sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
		return open(), open
	})
}

func TestIntegrityAndClose(t *testing.T) {
	t.Parallel()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "x", "a.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.IntegrityCheck(t.Context())
	if err != nil || res != "ok" {
		t.Fatalf("integrity = %q, %v", res, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}
