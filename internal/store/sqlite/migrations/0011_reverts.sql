-- Reverts of a session's files in progress (package undo): written before
-- the first file is touched, deleted with the record of the revert's end,
-- so that a crash in between is finished or rolled back at the next start.
CREATE TABLE reverts (
    session_id  TEXT PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    id          TEXT NOT NULL,
    owner       TEXT NOT NULL,
    expires_ms  INTEGER NOT NULL,
    data        TEXT NOT NULL
);
