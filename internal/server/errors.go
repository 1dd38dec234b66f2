package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/agentd/agentd/internal/core"
)

// apiError is an error with the HTTP status and opencode error name it
// maps to.
type apiError struct {
	status int
	name   string
	msg    string
	// retryAfter, in seconds, tells the client when to try again.
	retryAfter int
	// body, when set, is written instead of {name, data}: the errors
	// opencode's document gives another shape ({_tag, …}).
	body any
}

// tagged is an error in the {_tag, message, …} shape opencode's document
// gives some routes' errors.
func tagged(status int, tag, msg string, fields map[string]string) *apiError {
	body := map[string]string{"_tag": tag, "message": msg}
	for k, v := range fields {
		body[k] = v
	}
	return &apiError{status: status, name: tag, msg: msg, body: body}
}

func (e *apiError) Error() string { return e.msg }

func badRequest(format string, args ...any) *apiError {
	// opencode answers bad requests with the name "BadRequest".
	return &apiError{status: http.StatusBadRequest, name: "BadRequest", msg: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) *apiError {
	return &apiError{status: http.StatusNotFound, name: "NotFoundError", msg: fmt.Sprintf(format, args...)}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(core.NewError("UnknownError", "encode response: "+err.Error()))
	}
	writeRaw(w, status, append(b, '\n'))
}

// writeRaw answers with a JSON body encoded by the caller.
func writeRaw(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	// A known length spares the chunked framing of bodies over the
	// response buffer, and the client a read for the terminating chunk.
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeError(w http.ResponseWriter, e *apiError) {
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
	if e.body != nil {
		writeJSON(w, e.status, e.body)
		return
	}
	ce := core.NewError(e.name, e.msg)
	if id := w.Header().Get(requestIDHeader); id != "" && !strictData(e.name) {
		// The id a report of this error can quote, to find its log line.
		ce.Data.Extra = map[string]any{"httpRequestID": id}
	}
	writeJSON(w, e.status, ce)
}

// strictData reports whether opencode's document forbids anything in the
// named error's data but its own fields: such a body carries no request id
// (the X-Request-Id header and the access log still do).
func strictData(name string) bool {
	switch name {
	case "UnknownError", "MoveSessionError", "ProjectCopyError", "VcsApplyError", "ProviderAuthError",
		"MessageAbortedError", "StructuredOutputError", "ContextOverflowError", "ContentFilterError", "APIError":
		return true
	}
	return strings.HasPrefix(name, "Worktree") || strings.HasPrefix(name, "Workspace")
}

// decodeJSON reads a JSON request body into v. An empty body is allowed
// when emptyOK. Errors name the offending field where JSON tells it.
func decodeJSON(r *http.Request, v any, emptyOK bool) *apiError {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &apiError{status: http.StatusRequestEntityTooLarge, name: "PayloadTooLargeError", msg: fmt.Sprintf("request body is larger than %d bytes", mbe.Limit)}
		}
		return badRequest("read request body: %v", err)
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		if emptyOK {
			return nil
		}
		return badRequest("request body is required")
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	if err := dec.Decode(v); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return badRequest("malformed JSON at byte %d: %v", se.Offset, err)
		case errors.As(err, &te):
			field := te.Field
			if field == "" {
				field = "body"
			}
			return badRequest("field %s: expected %s, got JSON %s", field, te.Type.String(), te.Value)
		case errors.Is(err, io.ErrUnexpectedEOF):
			return badRequest("malformed JSON: unexpected end of input")
		default:
			return badRequest("invalid JSON: %v", err)
		}
	}
	if dec.More() {
		return badRequest("malformed JSON: trailing data after the object")
	}
	return nil
}
