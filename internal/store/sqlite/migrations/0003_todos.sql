-- The todo list the model keeps for a session (todowrite), in opencode's
-- shape: a JSON array of {content, status, priority}.
ALTER TABLE sessions ADD COLUMN todos TEXT NOT NULL DEFAULT '[]';
