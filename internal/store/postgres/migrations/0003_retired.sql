-- Messages and parts retired by a revert (a new prompt after it): kept, as
-- tombstones naming the revert, and never read again.
ALTER TABLE messages ADD COLUMN retired TEXT NOT NULL DEFAULT '';
ALTER TABLE parts ADD COLUMN retired TEXT NOT NULL DEFAULT '';
