-- Schedules (package schedule): a prompt sent on a cron expression or an
-- interval. next_ms is the next tick not yet claimed; a claim moves it
-- only where it still holds the tick claimed (a conditional UPDATE, which
-- a second node's UPDATE re-reads after the first commits), so that each
-- tick is fired by one node. pending holds a claimed tick until it is
-- fired; a node that died in between leaves it to be taken over once
-- pending_expires_ms has passed.
CREATE TABLE schedules (
    id                  TEXT PRIMARY KEY,
    created_ms          BIGINT NOT NULL,
    spec                TEXT NOT NULL,
    next_ms             BIGINT NOT NULL,
    pending             TEXT,
    pending_expires_ms  BIGINT NOT NULL DEFAULT 0,
    last                TEXT
);
CREATE INDEX schedules_next ON schedules (next_ms);
