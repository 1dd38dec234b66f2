-- Every index is one more B-tree written by each insert, on the single
-- writer's path, which every turn waits for. These three serve no query:
-- age pruning walks the event log in its order (seq) instead of by time;
-- messages_session_seq and parts_message_pos serve every lookup by
-- session and by message.
DROP INDEX events_time;
DROP INDEX messages_session;
DROP INDEX parts_message;
-- Deleting a session deleted its parts by a scan of every part.
CREATE INDEX parts_session ON parts (session_id);
