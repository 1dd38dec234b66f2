-- The event log without a cluster-wide lock on commit (issue 41). A
-- transaction no longer numbers its events: it inserts them here, keyed
-- by its transaction id and their place in it, and commits in parallel
-- with every other. A sequencer pass (agentd_sequence_events, run by
-- whichever node's tail gets there first) moves what has committed into
-- events, numbered after the head: seq stays dense and in the order
-- readers see it, and readers of events are unchanged. Only passes lock
-- event_head, and a pass that finds it locked does not wait.
CREATE TABLE event_inbox (
    xid         xid8 NOT NULL,
    ord         INTEGER NOT NULL,
    session_id  TEXT NOT NULL,
    type        TEXT NOT NULL,
    time_ms     BIGINT NOT NULL,
    data        TEXT NOT NULL,
    origin      TEXT NOT NULL,
    PRIMARY KEY (xid, ord)
);
-- The process that committed an event (the store's Committed): work done
-- once per event across the cluster is done by the node that wrote it.
ALTER TABLE events ADD COLUMN origin TEXT;
-- A hot queue: vacuum it often so that passes do not walk dead rows, and
-- never truncate it: truncation takes an exclusive lock on the table that
-- would stop every appending transaction while vacuum holds it.
ALTER TABLE event_inbox SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000,
    vacuum_truncate = false);

-- One pass: moves every committed event of the inbox into the log and
-- returns how many it moved, whether another pass held the head (busy:
-- try again), and the head after it. Each statement of a PL/pgSQL
-- function reads a fresh snapshot (read committed), so the move sees
-- every pass that committed before this one took the head's lock.
CREATE FUNCTION agentd_sequence_events(OUT moved BIGINT, OUT busy BOOLEAN, OUT head BIGINT)
LANGUAGE plpgsql AS $$
DECLARE
    base BIGINT;
BEGIN
    moved := 0;
    busy := false;
    IF EXISTS (SELECT 1 FROM event_inbox) THEN
        SELECT h.seq INTO base FROM event_head h FOR UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            busy := true;
        ELSE
            WITH m AS (
                DELETE FROM event_inbox RETURNING xid, ord, session_id, type, time_ms, data, origin
            ), ins AS (
                INSERT INTO events (seq, session_id, type, time_ms, data, origin)
                SELECT base + row_number() OVER (ORDER BY m.xid, m.ord), m.session_id, m.type, m.time_ms, m.data, m.origin
                FROM m RETURNING 1
            )
            SELECT count(*) INTO moved FROM ins;
            IF moved > 0 THEN
                UPDATE event_head SET seq = base + moved;
            END IF;
        END IF;
    END IF;
    SELECT h.seq INTO head FROM event_head h;
END
$$;
