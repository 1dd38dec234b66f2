-- Webhooks (package webhook): subscriptions, the callback URLs prompts
-- carry, the deliveries derived from the event log, and the relay's
-- cursor in that log. The log is the outbox: a run's end and its events
-- are one transaction; the relay turns the events into deliveries and
-- moves its cursor in another. Deliveries are leased to one node at a
-- time (FOR UPDATE SKIP LOCKED, times on the database's clock).
CREATE TABLE webhooks (
    id          TEXT PRIMARY KEY,
    url         TEXT NOT NULL,
    events      TEXT NOT NULL,
    session_id  TEXT REFERENCES sessions (id) ON DELETE CASCADE,
    created_ms  BIGINT NOT NULL
);
CREATE INDEX webhooks_session ON webhooks (session_id);

CREATE TABLE webhook_callbacks (
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    message_id  TEXT NOT NULL,
    url         TEXT NOT NULL,
    created_ms  BIGINT NOT NULL,
    PRIMARY KEY (session_id, message_id)
);

-- Deliveries outlive their session and subscription: what was sent, or
-- failed, stays visible until it is pruned.
CREATE TABLE webhook_deliveries (
    id               TEXT PRIMARY KEY,
    seq              BIGINT NOT NULL,
    target           TEXT NOT NULL,
    url              TEXT NOT NULL,
    session_id       TEXT NOT NULL,
    type             TEXT NOT NULL,
    body             TEXT NOT NULL,
    state            TEXT NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,
    last_status      INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT NOT NULL DEFAULT '',
    created_ms       BIGINT NOT NULL,
    next_ms          BIGINT NOT NULL,
    deadline_ms      BIGINT NOT NULL,
    ended_ms         BIGINT NOT NULL DEFAULT 0,
    lease_owner      TEXT NOT NULL DEFAULT '',
    lease_expires_ms BIGINT NOT NULL DEFAULT 0,
    UNIQUE (seq, target, url)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_ms) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_line ON webhook_deliveries (url, session_id, seq) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_failed ON webhook_deliveries (seq) WHERE state = 'failed';
CREATE INDEX webhook_deliveries_ended ON webhook_deliveries (ended_ms) WHERE state <> 'pending';
CREATE INDEX webhook_deliveries_session ON webhook_deliveries (session_id, seq);

-- The relay starts at the log's head: what happened before webhooks
-- existed is not sent.
CREATE TABLE webhook_cursor (
    one  BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
    seq  BIGINT NOT NULL
);
INSERT INTO webhook_cursor (seq) SELECT seq FROM event_head;
