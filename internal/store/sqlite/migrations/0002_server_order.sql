-- Messages and parts are ordered by the server's order of arrival, never
-- by ids a client may choose.
ALTER TABLE messages ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
UPDATE messages SET seq = (SELECT COUNT(*) FROM messages m2 WHERE m2.session_id = messages.session_id AND m2.id <= messages.id);
CREATE INDEX messages_session_seq ON messages (session_id, seq);

ALTER TABLE parts ADD COLUMN pos INTEGER NOT NULL DEFAULT 0;
UPDATE parts SET pos = (SELECT COUNT(*) FROM parts p2 WHERE p2.message_id = parts.message_id AND p2.id <= parts.id);
CREATE INDEX parts_message_pos ON parts (message_id, pos);

-- Rules granted by "always" answers, apart from the rules a client gave.
ALTER TABLE sessions ADD COLUMN granted TEXT NOT NULL DEFAULT '[]';
