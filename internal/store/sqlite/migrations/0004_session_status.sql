-- Each session's status, derived from its runs and rewritten in every
-- transaction that changes one of them, so that reading a status is one
-- row and listing the busy sessions one index. NULL: not written since
-- this column was added; the store then derives it from the runs.
ALTER TABLE sessions ADD COLUMN status TEXT;
ALTER TABLE sessions ADD COLUMN active INTEGER NOT NULL DEFAULT 0;
UPDATE sessions SET active = 1 WHERE id IN (SELECT session_id FROM runs WHERE state IN ('queued', 'running', 'retrying'));
CREATE INDEX sessions_active ON sessions (id) WHERE active = 1;
