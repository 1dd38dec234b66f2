package engine

import "errors"

// Errors returned to callers that decide what to tell a client.
var (
	// ErrBusy means the session is running and the busy policy is reject.
	ErrBusy = errors.New("session is busy")
	// ErrClosed means the engine is shutting down and admits nothing.
	ErrClosed = errors.New("server is shutting down")
)

// IDConflictError means an id a client chose is already taken by another
// session or message; nothing was written.
type IDConflictError struct {
	What, ID string
}

func (e *IDConflictError) Error() string {
	return e.What + " id " + e.ID + " is already used elsewhere; choose another or let the server choose"
}

// InputError is a prompt the engine refuses because of its content.
type InputError struct{ Msg string }

func (e *InputError) Error() string { return e.Msg }
