-- Reverts of a session's files in progress (package undo): written before
-- the first file is touched, deleted with the record of the revert's end.
-- A revert whose node died is taken over by another once expires_ms has
-- passed.
CREATE TABLE reverts (
    session_id  TEXT PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    id          TEXT NOT NULL,
    owner       TEXT NOT NULL,
    expires_ms  BIGINT NOT NULL,
    data        TEXT NOT NULL
);
CREATE INDEX reverts_expires ON reverts (expires_ms);
