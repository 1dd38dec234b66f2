// Package store defines the durable state behind agentd: sessions, messages,
// parts, runs and the event log. One interface, several drivers (SQLite,
// PostgreSQL), one conformance suite (storetest) that every driver passes.
//
// The central rule is the transactional outbox: a change and the events that
// describe it are written in the same transaction (Store.Tx), so the log
// never tells of a change that did not happen, nor misses one that did.
package store

import (
	"context"
	"errors"

	"github.com/agentd/agentd/internal/core"
)

// ErrNotFound is returned when a session, message or run does not exist.
var ErrNotFound = errors.New("not found")

// ErrConflict is returned when an insert collides with an existing row,
// or an upsert names a row that belongs to another session or message.
var ErrConflict = errors.New("conflict")

// ErrRunEnded is returned by an update of a run that has already ended: a
// terminal run never changes again.
var ErrRunEnded = errors.New("run has already ended")

// SessionQuery selects sessions for listing.
type SessionQuery struct {
	// Directory, when set, keeps only sessions bound to it.
	Directory string
	// Limit caps the number of sessions returned; 0 means no limit.
	Limit int
	// AfterUpdated and AfterID, when AfterID is set, continue a list
	// after that session: sessions come newest first (by update time,
	// then id), so the next are those updated earlier, or at the same
	// time with a greater id.
	AfterUpdated int64
	AfterID      string
	// Owner, when set, keeps only the sessions made through that API key.
	Owner string
}

// MessageQuery pages through a session's messages.
type MessageQuery struct {
	// Before, when set, keeps only messages whose id sorts before it.
	Before string
	// Since, when set, keeps only messages whose id sorts at or after it.
	Since string
	// After, when set, keeps only messages whose id sorts after it.
	After string
	// Limit keeps the newest Limit messages (in ascending order); 0 means all.
	Limit int
	// MaxBytes, when set, stops at the first message (from the newest)
	// that the stored parts read so far have taken past it: that message
	// is the oldest returned, whole, and older ones are left out.
	MaxBytes int
}

// MessageSeq is a message's id and its place in its session.
type MessageSeq struct {
	ID  string
	Seq int64
}

// EventQuery selects durable events after a position in the log.
type EventQuery struct {
	After     int64
	SessionID string
	Limit     int
	// MaxBytes, when set, stops the list once the events' properties
	// reach this size (at least one event is returned).
	MaxBytes int
}

// Reader is the read side, available both on the store and inside a
// transaction (where it sees the transaction's own writes).
type Reader interface {
	ScheduleReader
	// Session returns one session or ErrNotFound.
	Session(ctx context.Context, id string) (core.Session, error)
	// Sessions lists sessions, most recently updated first.
	Sessions(ctx context.Context, q SessionQuery) ([]core.Session, error)
	// Messages lists a session's messages with their parts, oldest first.
	Messages(ctx context.Context, sessionID string, q MessageQuery) ([]core.MessageWithParts, error)
	// MessageSeqs lists the ids and positions of a session's live messages
	// placed after position after, in order: what a runner asks the store
	// to learn which messages exist, without reading them (it knows the
	// ones it wrote).
	MessageSeqs(ctx context.Context, sessionID string, after int64) ([]MessageSeq, error)
	// MessageIntact reports whether a message of the session is live, its
	// parts included, and the history through it unchanged since it was
	// written: false once a revert retired it or any of its parts, or once
	// a message or part at or before it was deleted or changed
	// (RetireMessage, RetirePart, KeepPart) after it was written. A view
	// of the history through the message may be kept while it is true.
	MessageIntact(ctx context.Context, sessionID, messageID string) (bool, error)
	// RunMessages lists the infos (without parts) of the messages tied to a
	// run, oldest first: its user messages and its assistant messages.
	RunMessages(ctx context.Context, runID string) ([]core.Message, error)
	// LastRunMessage returns, with its parts, the newest message of the
	// given role tied to a run, or ErrNotFound.
	LastRunMessage(ctx context.Context, runID, role string) (core.MessageWithParts, error)
	// Message returns one message with its parts or ErrNotFound.
	Message(ctx context.Context, sessionID, messageID string) (core.MessageWithParts, error)
	// Run returns one run or ErrNotFound.
	Run(ctx context.Context, id string) (core.Run, error)
	// Runs lists a session's runs, newest first.
	Runs(ctx context.Context, sessionID string, limit int) ([]core.Run, error)
	// ActiveRuns lists non-terminal runs, oldest first; all sessions when
	// sessionID is empty.
	ActiveRuns(ctx context.Context, sessionID string) ([]core.Run, error)
	// SessionStatus returns the session's status, derived from its durable
	// runs: busy or retry while it has a non-terminal run, idle (with the
	// last outcome) otherwise; ErrNotFound when the session does not
	// exist.
	SessionStatus(ctx context.Context, sessionID string) (core.SessionStatus, error)
	// SessionStatusJSON is SessionStatus encoded as JSON, read as stored
	// where the store keeps it, for the routes that only pass it on.
	SessionStatusJSON(ctx context.Context, sessionID string) ([]byte, error)
	// ActiveStatuses returns the status of every session that has a
	// non-terminal run, keyed by session id.
	ActiveStatuses(ctx context.Context) (map[string]core.SessionStatus, error)
	// Permission returns one permission request or ErrNotFound.
	Permission(ctx context.Context, id string) (core.PermissionRequest, error)
	// PendingPermissions lists unanswered requests, oldest first; all
	// sessions when sessionID is empty.
	PendingPermissions(ctx context.Context, sessionID string) ([]core.PermissionRequest, error)
	// Question returns one question request or ErrNotFound.
	Question(ctx context.Context, id string) (core.QuestionRequest, error)
	// PendingQuestions lists unanswered questions, oldest first; all
	// sessions' when sessionID is empty.
	PendingQuestions(ctx context.Context, sessionID string) ([]core.QuestionRequest, error)
	// RunQuestions lists every question of a run, answered or not.
	RunQuestions(ctx context.Context, runID string) ([]core.QuestionRequest, error)
	// RunPermissions lists every permission request of a run, answered or
	// not, oldest first.
	RunPermissions(ctx context.Context, runID string) ([]core.PermissionRequest, error)
	// Events lists durable events with seq > q.After, in seq order.
	Events(ctx context.Context, q EventQuery) ([]core.Event, error)
	// Todos returns a session's todo list (empty when the model kept none),
	// or ErrNotFound.
	Todos(ctx context.Context, sessionID string) ([]core.Todo, error)
	// EventBounds returns the first retained seq and the last assigned seq.
	// When the log holds nothing, first is last+1.
	EventBounds(ctx context.Context) (first, last int64, err error)
	// RevertJournal returns the session's revert in progress or
	// ErrNotFound.
	RevertJournal(ctx context.Context, sessionID string) (RevertJournal, error)
	// RevertJournals lists the reverts in progress that expire before
	// the given time (epoch ms), oldest expiry first.
	RevertJournals(ctx context.Context, expiresBefore int64) ([]RevertJournal, error)
	KeyReader
}

// Tx is a write transaction. Writes become visible, and appended events
// are published, only when the function given to Store.Tx returns nil.
type Tx interface {
	Reader
	ScheduleWriter
	// InsertSession adds a session; ErrConflict if the id exists.
	InsertSession(ctx context.Context, s core.Session) error
	// UpdateSession replaces a session's fields.
	UpdateSession(ctx context.Context, s core.Session) error
	// DeleteSession removes a session with its messages, parts and runs.
	DeleteSession(ctx context.Context, id string) error
	// PutMessage inserts or replaces a message's info; ErrConflict when
	// the id belongs to another session.
	PutMessage(ctx context.Context, m core.Message) error
	// InsertMessage inserts a message; ErrConflict if the id exists.
	InsertMessage(ctx context.Context, m core.Message) error
	// PutPart inserts or replaces a part; ErrConflict when the id belongs
	// to another message.
	PutPart(ctx context.Context, p core.Part) error
	// PutPartJSON is PutPart given p's JSON encoding (json.Marshal(p)),
	// made by the caller once for the row and its event, and before the
	// transaction, outside the writer's serial section. PutMessageJSON
	// and UpdateRunJSON are the same for messages and runs.
	PutPartJSON(ctx context.Context, p core.Part, data []byte) error
	// PutMessageJSON is PutMessage given m's JSON encoding.
	PutMessageJSON(ctx context.Context, m core.Message, data []byte) error
	// RetireFrom retires a session's messages from messageID on (when
	// partID is set: that message's parts from partID on, and the messages
	// after it). They stay as tombstones marked with by; no read returns
	// them again. It returns the messages and the parts (of the message
	// that stays) it retired; ErrNotFound when messageID or partID is not
	// a live message or part of the session.
	RetireFrom(ctx context.Context, sessionID, messageID, partID, by string) (messages, parts []string, err error)
	// RetireMessage retires one live message of the session and its live
	// parts (a client deleted it): they stay as tombstones no read returns.
	// It returns the parts it retired; ErrNotFound when messageID is not a
	// live message of the session.
	RetireMessage(ctx context.Context, sessionID, messageID string) (parts []string, err error)
	// RetirePart retires one live part of a live message of the session
	// (a client deleted it), as a tombstone; ErrNotFound when there is no
	// such part.
	RetirePart(ctx context.Context, sessionID, messageID, partID string) error
	// KeepPart keeps the current version of a live part of a live message
	// of the session as a tombstone under the new id copyID, before a
	// client's change replaces it (PutPart); ErrNotFound when there is no
	// such part.
	KeepPart(ctx context.Context, sessionID, messageID, partID, copyID string) error
	// InsertRun adds a run; ErrConflict if the id exists.
	InsertRun(ctx context.Context, r core.Run) error
	// UpdateRun replaces a run's mutable fields; ErrRunEnded once the
	// stored run is terminal.
	UpdateRun(ctx context.Context, r core.Run) error
	// UpdateRunJSON is UpdateRun given r's JSON encoding.
	UpdateRunJSON(ctx context.Context, r core.Run, data []byte) error
	// PutTodos replaces a session's todo list; ErrNotFound when the session
	// does not exist.
	PutTodos(ctx context.Context, sessionID string, todos []core.Todo) error
	// PutPermission inserts or replaces a permission request.
	PutPermission(ctx context.Context, p core.PermissionRequest) error
	// PutQuestion inserts or replaces a question request.
	PutQuestion(ctx context.Context, q core.QuestionRequest) error
	// AppendEvent adds a durable event to the log. Its seq is assigned at
	// commit (the events the commit hook receives carry it).
	AppendEvent(ctx context.Context, ev core.Event) error
	// PutRevertJournal records a revert in progress; ErrConflict when the
	// session already has one.
	PutRevertJournal(ctx context.Context, j RevertJournal) error
	// TakeRevertJournal makes owner the carrier of the session's revert
	// id until expires; ErrNotFound when that revert is no longer in
	// progress.
	TakeRevertJournal(ctx context.Context, sessionID, id, owner string, expires int64) error
	// DeleteRevertJournal ends the session's revert id; ErrNotFound when
	// that revert is no longer in progress.
	DeleteRevertJournal(ctx context.Context, sessionID, id string) error
	// LockSession holds the session until commit: transactions that lock
	// the same session follow each other. Decisions about a session's runs
	// (admit, claim, end) and writes of its messages take it.
	LockSession(ctx context.Context, id string) error
	KeyWriter
}

// Store is a durable agentd store.
type Store interface {
	Reader
	// Tx runs fn in a write transaction and commits it when fn returns nil.
	// Events appended in fn are handed to the commit hook after the commit,
	// in seq order.
	Tx(ctx context.Context, fn func(Tx) error) error
	// SetCommitHook registers the function that receives each committed
	// transaction's events. Call it before the first Tx.
	SetCommitHook(func(events []core.Event))
	// PruneEvents deletes events older than the cutoff (epoch ms) and all but
	// the newest keep events (keep 0: no count limit). It returns how many it
	// deleted. The log is pruned from its start, in its order: an old event
	// that follows a newer one (a clock set back) stays until the events
	// before it have aged out too.
	PruneEvents(ctx context.Context, olderThanMS int64, keep int) (int64, error)
	// Close releases the store. It is safe to call more than once.
	Close() error
}
