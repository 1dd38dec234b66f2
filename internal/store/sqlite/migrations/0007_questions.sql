-- Questions the model asks the user (the question tool): durable, like
-- permission requests, so that a restart keeps them asked.
CREATE TABLE questions (
    id          TEXT PRIMARY KEY,
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    run_id      TEXT NOT NULL,
    pending     INTEGER NOT NULL,
    data        TEXT NOT NULL
);
CREATE INDEX questions_pending ON questions (session_id, id) WHERE pending = 1;
CREATE INDEX questions_run ON questions (run_id);
