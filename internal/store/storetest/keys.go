package storetest

import (
	"bytes"
	"errors"
	"testing"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// testAPIKeys pins the keys' table: a name is one live key's, revocation
// keeps its first time and frees the name, budgets are replaced, a run's
// spend goes to the key that owns the session (and stays when the session
// is deleted), and a session's owner is kept beside its JSON and lists by
// it.
func testAPIKeys(t *testing.T, s store.Store, reopen func() store.Store) {
	twin := apiKeysMade(t, s)
	mine := apiKeysOwned(t, s)
	apiKeysRevoked(t, s, mine, twin)
	apiKeysReopened(t, reopen())
}

// keyHash is the hash the test keys are stored with.
var keyHash = bytes.Repeat([]byte{7}, 32)

// apiKeysMade makes key_ci (own sessions, a budget) and key_ops (all
// sessions) and returns a second key named ci, refused while key_ci is
// valid.
func apiKeysMade(t *testing.T, s store.Store) store.APIKey {
	hash := keyHash
	ci := store.APIKey{ID: "key_ci", Name: "ci", Hash: hash, Budget: core.Budget{Tokens: 100, Cost: 0.5}, Created: 10}
	all := store.APIKey{ID: "key_ops", Name: "ops", Hash: hash, AllSessions: true, Created: 11}
	mustTx(t, s, func(tx store.Tx) error {
		if err := tx.InsertAPIKey(ctx(t), ci); err != nil {
			return err
		}
		return tx.InsertAPIKey(ctx(t), all)
	})
	twin := ci
	twin.ID, twin.Created = "key_ci2", 12
	if err := s.Tx(ctx(t), func(tx store.Tx) error { return tx.InsertAPIKey(ctx(t), twin) }); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a second live key named ci: %v, want ErrConflict", err)
	}
	got, err := s.APIKey(ctx(t), "key_ci")
	if err != nil || got.Name != "ci" || !bytes.Equal(got.Hash, hash) || got.AllSessions || got.Budget.Tokens != 100 ||
		got.Budget.Cost != 0.5 || got.Created != 10 || got.Revoked != 0 {
		t.Fatalf("key read back: %+v, %v", got, err)
	}
	if _, err := s.APIKey(ctx(t), "key_nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown key: %v", err)
	}
	return twin
}

// apiKeysOwned makes sessions of key_ci, key_ops and the operator, charges
// runs of key_ci's and the operator's, and returns key_ci's.
func apiKeysOwned(t *testing.T, s store.Store) core.Session {
	mine := NewSession("/w", 1)
	mine.Owner = "key_ci"
	theirs := NewSession("/w", 2)
	theirs.Owner = "key_ops"
	operator := NewSession("/w", 3)
	mustTx(t, s, func(tx store.Tx) error {
		for _, sess := range []core.Session{mine, theirs, operator} {
			if err := tx.InsertSession(ctx(t), sess); err != nil {
				return err
			}
		}
		for _, id := range []string{mine.ID, operator.ID, "ses_gone"} {
			if err := tx.ChargeKey(ctx(t), id, core.Spend{Tokens: 40, Cost: 0.25}); err != nil {
				return err
			}
		}
		return tx.SetAPIKeyBudget(ctx(t), "key_ops", core.Budget{Tokens: 7})
	})
	if owner, err := s.SessionOwner(ctx(t), mine.ID); err != nil || owner != "key_ci" {
		t.Fatalf("owner of mine: %q, %v", owner, err)
	}
	if owner, err := s.SessionOwner(ctx(t), operator.ID); err != nil || owner != "" {
		t.Fatalf("owner of the operator's: %q, %v", owner, err)
	}
	if _, err := s.SessionOwner(ctx(t), "ses_nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("owner of no session: %v", err)
	}
	if sess, err := s.Session(ctx(t), mine.ID); err != nil || sess.Owner != "key_ci" {
		t.Fatalf("session read back: owner %q, %v", sess.Owner, err)
	}
	list, err := s.Sessions(ctx(t), store.SessionQuery{Owner: "key_ci"})
	if err != nil || len(list) != 1 || list[0].ID != mine.ID || list[0].Owner != "key_ci" {
		t.Fatalf("sessions of key_ci: %+v, %v", list, err)
	}
	return mine
}

// apiKeysRevoked deletes key_ci's session, revokes key_ci twice and makes
// the twin under its name.
func apiKeysRevoked(t *testing.T, s store.Store, mine core.Session, twin store.APIKey) {
	mustTx(t, s, func(tx store.Tx) error {
		if err := tx.DeleteSession(ctx(t), mine.ID); err != nil {
			return err
		}
		if err := tx.RevokeAPIKey(ctx(t), "key_ci", 50); err != nil {
			return err
		}
		return tx.RevokeAPIKey(ctx(t), "key_ci", 60)
	})
	if err := s.Tx(ctx(t), func(tx store.Tx) error { return tx.RevokeAPIKey(ctx(t), "key_nope", 1) }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("revoke an unknown key: %v", err)
	}
	if err := s.Tx(ctx(t), func(tx store.Tx) error { return tx.SetAPIKeyBudget(ctx(t), "key_nope", core.Budget{}) }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("budget of an unknown key: %v", err)
	}
	mustTx(t, s, func(tx store.Tx) error { return tx.InsertAPIKey(ctx(t), twin) })
}

// apiKeysReopened reads the keys back from a reopened store.
func apiKeysReopened(t *testing.T, s store.Store) {
	keys, err := s.APIKeys(ctx(t))
	if err != nil || len(keys) != 3 {
		t.Fatalf("keys after reopen: %+v, %v", keys, err)
	}
	if k := keys[0]; k.ID != "key_ci" || k.Revoked != 50 || k.Spent != (core.Spend{Tokens: 40, Cost: 0.25}) {
		t.Errorf("revoked key: %+v, want revoked at 50 with its session's spend kept", k)
	}
	if k := keys[1]; k.ID != "key_ops" || !k.AllSessions || k.Budget.Tokens != 7 || k.Budget.Cost != 0 || k.Spent != (core.Spend{}) {
		t.Errorf("key of all sessions: %+v", k)
	}
	if k := keys[2]; k.ID != "key_ci2" || k.Revoked != 0 {
		t.Errorf("a new key under a revoked key's name: %+v", k)
	}
}
