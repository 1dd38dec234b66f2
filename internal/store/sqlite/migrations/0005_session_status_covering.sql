-- The busy list reads id and status of the active sessions: an index that
-- holds both answers it without visiting the table.
DROP INDEX sessions_active;
CREATE INDEX sessions_active ON sessions (id, status) WHERE active = 1;
