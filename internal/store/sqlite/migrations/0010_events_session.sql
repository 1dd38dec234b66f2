-- The per-session index of the event log put each event's entry on the
-- page of its session's range: a group commit of a thousand sessions'
-- events dirtied a page per session, a sixth of the bytes written and a
-- seventh of the committer's time. Only a session stream that fell behind
-- the in-memory ring reads the log by session; it now walks the log from
-- its cursor, as the global stream does.
DROP INDEX events_session;
