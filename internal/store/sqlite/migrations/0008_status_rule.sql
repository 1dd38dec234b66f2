-- The version of the rule (core.StatusRule) that computed each stored
-- status: a status stored by another version is not read but derived
-- again, and start-up rewrites such rows (sqlstore.RefreshStatuses).
ALTER TABLE sessions ADD COLUMN status_rule INTEGER NOT NULL DEFAULT 0;
