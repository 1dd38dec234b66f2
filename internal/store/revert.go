package store

// RevertJournal is a revert (or unrevert) of a session's files in
// progress, written before its first file is touched and deleted in the
// transaction that records its end (see package undo). A session has one
// at most; while it exists the session admits no prompt and no other
// revert.
type RevertJournal struct {
	SessionID string
	// ID names this revert, so that only its own end deletes the journal.
	ID string
	// Owner is the node carrying it out; once Expires (epoch ms, the
	// owner's clock) has passed, another node may take it over.
	Owner   string
	Expires int64
	// Data is the journal itself, opaque to the store.
	Data []byte
}
