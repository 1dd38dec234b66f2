package torture

import (
	"context"
	"testing"

	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/postgres"
	"github.com/agentd/agentd/internal/store/postgres/pgtest"
)

// TestClusterTorture is the crash torture test on three nodes sharing a
// PostgreSQL database: prompts, aborts, waits and status reads go to random
// nodes while random nodes are killed; the killed node's runs are taken
// over by the others (or by itself when it comes back first).
func TestClusterTorture(t *testing.T) {
	seconds := tortureSeconds(t)
	url := pgtest.Schema(t)
	runTorture(t, t.TempDir(), seconds, 3, url, func() store.Store {
		st, err := postgres.Open(context.Background(), url, postgres.Options{Node: "verifier"})
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}
