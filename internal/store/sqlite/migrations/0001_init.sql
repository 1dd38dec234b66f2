CREATE TABLE sessions (
    id          TEXT PRIMARY KEY,
    directory   TEXT NOT NULL,
    created_ms  INTEGER NOT NULL,
    updated_ms  INTEGER NOT NULL,
    data        TEXT NOT NULL
);
CREATE INDEX sessions_updated ON sessions (updated_ms DESC, id);
CREATE INDEX sessions_directory ON sessions (directory, updated_ms DESC);

CREATE TABLE messages (
    id          TEXT PRIMARY KEY,
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    run_id      TEXT NOT NULL DEFAULT '',
    role        TEXT NOT NULL,
    data        TEXT NOT NULL
);
CREATE INDEX messages_session ON messages (session_id, id);
CREATE INDEX messages_run ON messages (run_id, id);

CREATE TABLE parts (
    id          TEXT PRIMARY KEY,
    message_id  TEXT NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    session_id  TEXT NOT NULL,
    data        TEXT NOT NULL
);
CREATE INDEX parts_message ON parts (message_id, id);

CREATE TABLE runs (
    id               TEXT PRIMARY KEY,
    session_id       TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    state            TEXT NOT NULL,
    created_ms       INTEGER NOT NULL,
    ended_ms         INTEGER NOT NULL DEFAULT 0,
    data             TEXT NOT NULL
);
CREATE INDEX runs_session ON runs (session_id, id);
CREATE INDEX runs_active ON runs (created_ms, id) WHERE state IN ('queued', 'running', 'retrying');
CREATE INDEX runs_active_session ON runs (session_id, created_ms, id) WHERE state IN ('queued', 'running', 'retrying');
CREATE INDEX runs_ended ON runs (session_id, ended_ms DESC) WHERE state IN ('succeeded', 'failed', 'interrupted');

CREATE TABLE events (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id  TEXT NOT NULL,
    type        TEXT NOT NULL,
    time_ms     INTEGER NOT NULL,
    data        TEXT NOT NULL
);
CREATE INDEX events_session ON events (session_id, seq);
CREATE INDEX events_time ON events (time_ms);

CREATE TABLE permissions (
    id          TEXT PRIMARY KEY,
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    run_id      TEXT NOT NULL,
    pending     INTEGER NOT NULL,
    data        TEXT NOT NULL
);
CREATE INDEX permissions_pending ON permissions (session_id, id) WHERE pending = 1;
CREATE INDEX permissions_run ON permissions (run_id);
