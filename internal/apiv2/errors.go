package apiv2

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/agentd/agentd/internal/engine"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/undo"
)

// apiError is an error in opencode 2's shape: a tagged object,
// {_tag, message, …fields}, with the HTTP status it goes with.
type apiError struct {
	status int
	body   map[string]any
	// retryAfter, in seconds, tells the client when to try again.
	retryAfter int
}

func (e *apiError) Error() string { s, _ := e.body["message"].(string); return s }

func tagged(status int, tag, msg string, fields ...string) *apiError {
	body := map[string]any{"_tag": tag, "message": msg}
	for i := 0; i+1 < len(fields); i += 2 {
		body[fields[i]] = fields[i+1]
	}
	return &apiError{status: status, body: body}
}

// invalid is InvalidRequestError: a request the API cannot take.
func invalid(format string, args ...any) *apiError {
	return tagged(http.StatusBadRequest, "InvalidRequestError", fmt.Sprintf(format, args...))
}

// unsupported is InvalidRequestError for an operation that cannot run on
// this server (kind "unsupported" says so to a program).
func unsupported(msg string) *apiError {
	e := tagged(http.StatusBadRequest, "InvalidRequestError", msg)
	e.body["kind"] = "unsupported"
	return e
}

func sessionNotFound(id string) *apiError {
	return tagged(http.StatusNotFound, "SessionNotFoundError", "Session not found: "+id, "sessionID", id)
}

func messageNotFound(sessionID, messageID string) *apiError {
	return tagged(http.StatusNotFound, "MessageNotFoundError", "Message not found: "+messageID,
		"sessionID", sessionID, "messageID", messageID)
}

func conflict(msg string) *apiError { return tagged(http.StatusConflict, "ConflictError", msg) }

func unavailable(msg string) *apiError {
	return tagged(http.StatusServiceUnavailable, "ServiceUnavailableError", msg)
}

// storeErr maps the store's and the engine's errors of a request about a
// session: not found is the session's 404 (unknown is never idle).
func (a *API) storeErr(err error, sessionID string) *apiError {
	var ie *engine.InputError
	var idc *engine.IDConflictError
	if c, ok := a.st.(store.Classifier); ok && err != nil {
		err = c.Classify(err)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		return sessionNotFound(sessionID)
	case errors.As(err, &ie):
		return invalid("%s", ie.Msg)
	case errors.Is(err, undo.ErrReverting), errors.Is(err, engine.ErrSessionBusy):
		e := conflict("session " + sessionID + " is busy: " + err.Error())
		e.body["resource"] = sessionID
		return e
	case errors.Is(err, engine.ErrBusy), errors.Is(err, engine.ErrAlreadyAnswered), errors.As(err, &idc):
		return conflict(err.Error())
	case errors.Is(err, engine.ErrClosed):
		return unavailable(err.Error())
	case errors.Is(err, store.ErrStorageFull), errors.Is(err, store.ErrStorage):
		if a.cfg.Unhealthy != nil && !errors.Is(err, store.ErrStorageFull) {
			// A node whose database file was deleted or replaced fails
			// reads too: the answer names that cause, as v1's does.
			if lost := a.cfg.Unhealthy(); lost != nil {
				err = lost
			}
		}
		e := unavailable("the database cannot take writes (" + err.Error() + "); nothing was changed, retry")
		e.body["service"], e.retryAfter = "storage", 10
		return e
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return unavailable("request cancelled")
	default:
		a.log.Error("request failed", "session", sessionID, "err", err)
		return tagged(http.StatusInternalServerError, "UnknownError", "internal error")
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(map[string]string{"_tag": "UnknownError", "message": "encode response: " + err.Error()})
	}
	b = append(b, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// data answers {"data": v}, opencode 2's envelope of most answers.
func data(w http.ResponseWriter, v any) { writeJSON(w, http.StatusOK, map[string]any{"data": v}) }

func noContent(w http.ResponseWriter) { w.WriteHeader(http.StatusNoContent) }

func writeError(w http.ResponseWriter, e *apiError) {
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
	writeJSON(w, e.status, e.body)
}

// decode reads a JSON request body into v; an empty body is refused
// unless emptyOK. Fields the API does not know are ignored; a field of
// the wrong type is named in the error.
func decode(r *http.Request, v any, emptyOK bool) *apiError {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return invalid("read request body: %v", err)
	}
	if strings.TrimSpace(string(body)) == "" {
		if emptyOK {
			return nil
		}
		return invalid("request body is required")
	}
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := te.Field
			if field == "" {
				field = "body"
			}
			e := invalid("field %s: expected %s, got JSON %s", field, te.Type.String(), te.Value)
			e.body["field"] = field
			return e
		}
		return invalid("malformed JSON: %v", err)
	}
	return nil
}
