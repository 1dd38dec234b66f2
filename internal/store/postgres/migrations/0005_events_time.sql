-- Every index is one more B-tree written by each event insert; age
-- pruning walks the event log in its order (seq) instead of by time.
DROP INDEX events_time;
