package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// API keys: one row each in api_keys, the token's hash and never the
// token; a session's owner is its owner_key column.

const keyCols = `id, name, hash, all_sessions, budget_tokens, budget_cost, spent_tokens, spent_cost, created_ms, revoked_ms`

func scanKey(sc interface{ Scan(...any) error }) (store.APIKey, error) {
	var k store.APIKey
	var all int
	err := sc.Scan(&k.ID, &k.Name, &k.Hash, &all, &k.Budget.Tokens, &k.Budget.Cost,
		&k.Spent.Tokens, &k.Spent.Cost, &k.Created, &k.Revoked)
	k.AllSessions = all != 0
	return k, err
}

// APIKey implements store.Reader.
func (r Reader) APIKey(ctx context.Context, id string) (store.APIKey, error) {
	k, err := scanKey(r.queryRow(ctx, `SELECT `+keyCols+` FROM api_keys WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return k, store.ErrNotFound
	}
	if err != nil {
		return k, fmt.Errorf("get key: %w", err)
	}
	return k, nil
}

// APIKeys implements store.Reader.
func (r Reader) APIKeys(ctx context.Context) ([]store.APIKey, error) {
	rows, err := r.query(ctx, `SELECT `+keyCols+` FROM api_keys ORDER BY created_ms, id`)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	defer rows.Close()
	var out []store.APIKey
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, fmt.Errorf("scan keys: %w", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	return out, nil
}

// SessionOwner implements store.Reader.
func (r Reader) SessionOwner(ctx context.Context, sessionID string) (string, error) {
	var owner string
	err := r.queryRow(ctx, `SELECT owner_key FROM sessions WHERE id = ?`, sessionID).Scan(&owner)
	if errors.Is(err, sql.ErrNoRows) {
		return "", store.ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("get session owner: %w", err)
	}
	return owner, nil
}

// InsertAPIKey implements store.Tx.
func (t *Tx) InsertAPIKey(ctx context.Context, k store.APIKey) error {
	all := 0
	if k.AllSessions {
		all = 1
	}
	return t.insert(ctx, "key", `INSERT INTO api_keys (`+keyCols+`) VALUES (?, ?, ?, ?, ?, ?, 0, 0, ?, 0)`,
		k.ID, k.Name, k.Hash, all, k.Budget.Tokens, k.Budget.Cost, k.Created)
}

// RevokeAPIKey implements store.Tx.
func (t *Tx) RevokeAPIKey(ctx context.Context, id string, at int64) error {
	return t.update(ctx, "key", `UPDATE api_keys SET revoked_ms = CASE WHEN revoked_ms = 0 THEN ? ELSE revoked_ms END WHERE id = ?`, at, id)
}

// SetAPIKeyBudget implements store.Tx.
func (t *Tx) SetAPIKeyBudget(ctx context.Context, id string, b core.Budget) error {
	return t.update(ctx, "key", `UPDATE api_keys SET budget_tokens = ?, budget_cost = ? WHERE id = ?`, b.Tokens, b.Cost, id)
}

// ChargeKey implements store.Tx.
func (t *Tx) ChargeKey(ctx context.Context, sessionID string, spent core.Spend) error {
	_, err := t.exec(ctx, `UPDATE api_keys SET spent_tokens = spent_tokens + ?, spent_cost = spent_cost + ?
		WHERE id = (SELECT owner_key FROM sessions WHERE id = ? AND owner_key <> '')`, spent.Tokens, spent.Cost, sessionID)
	if err != nil {
		return fmt.Errorf("charge key of session %s: %w", sessionID, err)
	}
	return nil
}
