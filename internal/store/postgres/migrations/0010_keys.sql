-- API keys (package access): the SHA-256 of each token's secret, never the
-- token; what the key may see, its budget and what its sessions spent. A
-- name belongs to one key at a time among those not revoked. A session
-- made through a key names it in owner_key ('' for the operator's).
CREATE TABLE api_keys (
    id            TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    hash          BYTEA NOT NULL,
    all_sessions  INTEGER NOT NULL,
    budget_tokens BIGINT NOT NULL DEFAULT 0,
    budget_cost   DOUBLE PRECISION NOT NULL DEFAULT 0,
    spent_tokens  BIGINT NOT NULL DEFAULT 0,
    spent_cost    DOUBLE PRECISION NOT NULL DEFAULT 0,
    created_ms    BIGINT NOT NULL,
    revoked_ms    BIGINT NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX api_keys_name ON api_keys (name) WHERE revoked_ms = 0;
ALTER TABLE sessions ADD COLUMN owner_key TEXT NOT NULL DEFAULT '';
CREATE INDEX sessions_owner ON sessions (owner_key, updated_ms DESC, id) WHERE owner_key <> '';
