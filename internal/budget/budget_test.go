package budget

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/sqlite"
	"github.com/agentd/agentd/internal/store/storetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestCheck: a call is refused once the session's spend with the running
// run's reaches a cap, and once the key's does; each refusal names whose
// budget and holds the figures.
func TestCheck(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "b.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	key := store.APIKey{ID: "key_0123456789abcdef", Name: "ci", Hash: make([]byte, 32), Budget: core.Budget{Cost: 1}}
	sess := storetest.NewSession("/a", 1)
	sess.Owner, sess.Cost, sess.Tokens = key.ID, 0.25, core.Tokens{Input: 60, Output: 20}
	sess.Budget = &core.Budget{Tokens: 100}
	if err := st.Tx(ctx, func(tx store.Tx) error {
		if err := tx.InsertAPIKey(ctx, key); err != nil {
			return err
		}
		if err := tx.InsertSession(ctx, sess); err != nil {
			return err
		}
		// Runs of other sessions of the key spent $0.70.
		return tx.ChargeKey(ctx, sess.ID, core.Spend{Cost: 0.70})
	}); err != nil {
		t.Fatal(err)
	}
	c := New(st)
	if e, err := c.Check(ctx, sess.ID, core.Spend{Tokens: 19, Cost: 0.01}); e != nil || err != nil {
		t.Fatalf("below every cap: %v, %v", e, err)
	}
	e, err := c.Check(ctx, sess.ID, core.Spend{Tokens: 20})
	if err != nil || e == nil || e.Data.Extra["budget"] != "session" || e.Data.Extra["exceeded"] != "tokens" ||
		!strings.Contains(e.Data.Message, "100 tokens of its 100-token budget") {
		t.Fatalf("the session's tokens reach its cap: %+v, %v", e, err)
	}
	e, err = c.Check(ctx, sess.ID, core.Spend{Cost: 0.30})
	if err != nil || e == nil || e.Data.Extra["budget"] != "key" || e.Data.Extra["key"] != key.ID ||
		!strings.Contains(e.Data.Message, "API key ci") {
		t.Fatalf("the key's cost reaches its cap: %+v, %v", e, err)
	}
	if e, err := c.Check(ctx, "ses_gone", core.Spend{Tokens: 1e9}); e != nil || err != nil {
		t.Fatalf("a session that is gone has no budget: %v, %v", e, err)
	}
}

func TestWithin(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		next, prev core.Budget
		want       bool
	}{
		{core.Budget{Tokens: 50}, core.Budget{Tokens: 100}, true},
		{core.Budget{Tokens: 100, Cost: 2}, core.Budget{Tokens: 100}, true},
		{core.Budget{Tokens: 150}, core.Budget{Tokens: 100}, false},
		{core.Budget{}, core.Budget{Tokens: 100}, false},
		{core.Budget{Tokens: 100}, core.Budget{Tokens: 100, Cost: 1}, false},
		{core.Budget{Tokens: 100, Cost: 0.5}, core.Budget{Tokens: 100, Cost: 1}, true},
		{core.Budget{}, core.Budget{}, true},
	} {
		if got := Within(c.next, c.prev); got != c.want {
			t.Errorf("Within(%+v, %+v) = %t, want %t", c.next, c.prev, got, c.want)
		}
	}
}

func TestValid(t *testing.T) {
	t.Parallel()
	for _, b := range []core.Budget{{Tokens: -1}, {Cost: -0.5}} {
		if Valid(b) == nil {
			t.Errorf("Valid(%+v) accepted", b)
		}
	}
	if err := Valid(core.Budget{Tokens: 5, Cost: 0.1}); err != nil {
		t.Error(err)
	}
}
