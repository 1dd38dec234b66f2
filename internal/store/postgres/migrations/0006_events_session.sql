-- As in SQLite (0010): every event-writing transaction holds the event
-- head's lock through its commit, and the per-session index was one more
-- B-tree written there; a session stream that fell behind the in-memory
-- ring walks the log from its cursor instead.
DROP INDEX events_session;
