-- The tombstones of a client's deletes and of the former versions of the
-- parts it changed, found without reading the session's other rows:
-- MessageIntact looks for them at the start of every run that reuses the
-- history the engine kept. The predicates are the query's own, so that
-- the planner can use them.
CREATE INDEX messages_edits ON messages (session_id, seq) WHERE retired LIKE 'delete@%';
CREATE INDEX parts_edits ON parts (session_id) WHERE retired LIKE 'delete@%' OR retired LIKE 'edit@%';
