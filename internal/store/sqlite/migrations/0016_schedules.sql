-- Schedules (package schedule): a prompt sent on a cron expression or an
-- interval. next_ms is the next tick not yet claimed; a claim moves it
-- and records the tick in pending until it is fired, so that a crash in
-- between is finished by the next pass.
CREATE TABLE schedules (
    id                  TEXT PRIMARY KEY,
    created_ms          INTEGER NOT NULL,
    spec                TEXT NOT NULL,
    next_ms             INTEGER NOT NULL,
    pending             TEXT,
    pending_expires_ms  INTEGER NOT NULL DEFAULT 0,
    last                TEXT
);
CREATE INDEX schedules_next ON schedules (next_ms);
