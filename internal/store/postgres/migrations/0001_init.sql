-- agentd's schema on PostgreSQL: the same tables as on SQLite (JSON kept as
-- text, so what a client sent is returned byte for byte), plus what several
-- nodes sharing the database need: run leases and the event log's head.
CREATE TABLE sessions (
    id          TEXT PRIMARY KEY,
    directory   TEXT NOT NULL,
    created_ms  BIGINT NOT NULL,
    updated_ms  BIGINT NOT NULL,
    data        TEXT NOT NULL,
    granted     TEXT NOT NULL DEFAULT '[]'
);
CREATE INDEX sessions_updated ON sessions (updated_ms DESC, id);
CREATE INDEX sessions_directory ON sessions (directory, updated_ms DESC);

CREATE TABLE messages (
    id          TEXT PRIMARY KEY,
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    run_id      TEXT NOT NULL DEFAULT '',
    role        TEXT NOT NULL,
    seq         BIGINT NOT NULL DEFAULT 0,
    data        TEXT NOT NULL
);
CREATE INDEX messages_session_seq ON messages (session_id, seq);
CREATE INDEX messages_run ON messages (run_id, id);

CREATE TABLE parts (
    id          TEXT PRIMARY KEY,
    message_id  TEXT NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    session_id  TEXT NOT NULL,
    pos         BIGINT NOT NULL DEFAULT 0,
    data        TEXT NOT NULL
);
CREATE INDEX parts_message_pos ON parts (message_id, pos);
CREATE INDEX parts_session ON parts (session_id);

-- A run that executes is owned by one node: lease_owner, lease_epoch (the
-- fencing token, incremented by every claim; 0 means never claimed) and
-- lease_expires_ms on the database's clock (0 once released). A durable
-- abort request waits in abort_reason for the owner, or for whoever claims
-- the run next.
CREATE TABLE runs (
    id               TEXT PRIMARY KEY,
    session_id       TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    state            TEXT NOT NULL,
    created_ms       BIGINT NOT NULL,
    ended_ms         BIGINT NOT NULL DEFAULT 0,
    data             TEXT NOT NULL,
    lease_owner      TEXT NOT NULL DEFAULT '',
    lease_epoch      BIGINT NOT NULL DEFAULT 0,
    lease_expires_ms BIGINT NOT NULL DEFAULT 0,
    abort_reason     TEXT NOT NULL DEFAULT ''
);
CREATE INDEX runs_session ON runs (session_id, id);
CREATE INDEX runs_active ON runs (created_ms, id) WHERE state IN ('queued', 'running', 'retrying');
CREATE INDEX runs_active_session ON runs (session_id, created_ms, id) WHERE state IN ('queued', 'running', 'retrying');
CREATE INDEX runs_ended ON runs (session_id, ended_ms DESC) WHERE state IN ('succeeded', 'failed', 'interrupted');
CREATE INDEX runs_owner ON runs (lease_owner) WHERE state IN ('queued', 'running', 'retrying');

CREATE TABLE events (
    seq         BIGINT PRIMARY KEY,
    session_id  TEXT NOT NULL,
    type        TEXT NOT NULL,
    time_ms     BIGINT NOT NULL,
    data        TEXT NOT NULL
);
CREATE INDEX events_session ON events (session_id, seq);
CREATE INDEX events_time ON events (time_ms);

-- The last assigned seq. Its one row is locked by every transaction that
-- appends events, from the moment it appends (right before commit) until
-- it commits: seq is dense and a reader never sees seq N+1 before N.
CREATE TABLE event_head (
    one  BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
    seq  BIGINT NOT NULL
);
INSERT INTO event_head (seq) VALUES (0);

CREATE TABLE permissions (
    id          TEXT PRIMARY KEY,
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    run_id      TEXT NOT NULL,
    pending     INTEGER NOT NULL,
    data        TEXT NOT NULL
);
CREATE INDEX permissions_pending ON permissions (session_id, id) WHERE pending = 1;
CREATE INDEX permissions_run ON permissions (run_id);
