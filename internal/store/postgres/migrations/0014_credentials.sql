-- Credentials clients store (package credential: PUT /auth/{id}, plugins'
-- logins, opencode 2's connect), shared by every node of the cluster: one
-- row per provider, the entry as opencode's auth.json holds it (JSON). The
-- keys are in plain text, as in auth.json: the database's access control
-- guards them, as it guards the sessions. Writers lock the table (changes
-- are rare), so that one change never interleaves with another.
CREATE TABLE credentials (
    id         TEXT PRIMARY KEY,
    data       TEXT NOT NULL,
    updated_ms BIGINT NOT NULL
);
