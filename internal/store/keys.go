package store

import (
	"context"

	"github.com/agentd/agentd/internal/core"
)

// APIKey is an API key as the store keeps it: never its token, only the
// SHA-256 of the token's secret (package access makes and checks them).
type APIKey struct {
	ID   string
	Name string
	// Hash is the SHA-256 of the token's secret.
	Hash []byte
	// AllSessions lets the key see and change every session; without it
	// the key sees only the sessions made through it.
	AllSessions bool
	// Budget caps what the sessions made through the key may spend
	// together (its Spent is not kept: see Spent).
	Budget core.Budget
	// Spent is what the key's sessions' runs spent, added when each run
	// ends (ChargeKey); deleting a session does not give it back.
	Spent core.Spend
	// Created and Revoked are epoch milliseconds; Revoked is 0 while the
	// key is valid.
	Created int64
	Revoked int64
}

// KeyReader reads API keys and which key owns a session.
type KeyReader interface {
	// APIKey returns one key, revoked or not, or ErrNotFound.
	APIKey(ctx context.Context, id string) (APIKey, error)
	// APIKeys lists every key, revoked ones included, oldest first.
	APIKeys(ctx context.Context) ([]APIKey, error)
	// SessionOwner returns the id of the key a session was made through
	// ("" for the operator's), or ErrNotFound.
	SessionOwner(ctx context.Context, sessionID string) (string, error)
}

// KeyWriter changes API keys inside a transaction.
type KeyWriter interface {
	// InsertAPIKey adds a key; ErrConflict when its id, or its name among
	// the keys not revoked, is taken.
	InsertAPIKey(ctx context.Context, k APIKey) error
	// RevokeAPIKey marks a key revoked at the given time (epoch ms); a key
	// revoked before keeps its first time. ErrNotFound when there is no
	// such key.
	RevokeAPIKey(ctx context.Context, id string, at int64) error
	// SetAPIKeyBudget replaces a key's caps (Spent is ignored);
	// ErrNotFound when there is no such key.
	SetAPIKeyBudget(ctx context.Context, id string, b core.Budget) error
	// ChargeKey adds what a run spent to the key that owns the session
	// (nothing when the operator owns it, or the session is gone).
	ChargeKey(ctx context.Context, sessionID string, spent core.Spend) error
}
