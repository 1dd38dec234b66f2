package server

import (
	"bufio"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/snapshot"
)

// diff is GET /session/{id}/diff: the session's changes, written as git
// reports them (engine.DiffEach), one file at a time, so that a large
// diff is never held whole; a file the operator's rules deny to read
// comes without its patch.
func (s *Server) diff(w http.ResponseWriter, r *http.Request) *apiError {
	id := r.PathValue("id")
	msg := r.URL.Query().Get("messageID")
	if msg != "" && !core.ValidID(core.PrefixMessage, msg) {
		return badRequest("messageID: %q is not a message id (msg_…)", msg)
	}
	aw := &arrayWriter{w: w}
	err := s.eng.DiffEach(r.Context(), id, msg, aw.item)
	switch {
	case err != nil && aw.out != nil:
		// The answer has begun: the client must see it cut, not whole.
		s.log.Warn("session diff cut short", "session", id, "err", err)
		panic(http.ErrAbortHandler)
	case errors.Is(err, snapshot.ErrGone):
		return tagged(http.StatusGone, "SnapshotGoneError", err.Error(), map[string]string{"sessionID": id})
	case err != nil:
		return s.undoErr(err, id)
	case aw.out == nil:
		writeJSON(w, http.StatusOK, []snapshot.FileDiff{})
		return nil
	}
	_, _ = aw.out.WriteString("]\n")
	_ = aw.out.Flush()
	return nil
}

// arrayWriter writes a JSON array item by item; the response starts with
// the first item.
type arrayWriter struct {
	w   http.ResponseWriter
	out *bufio.Writer
}

func (a *arrayWriter) item(d snapshot.FileDiff) error {
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	sep := byte(',')
	if a.out == nil {
		a.w.Header().Set("Content-Type", "application/json")
		a.w.WriteHeader(http.StatusOK)
		a.out = bufio.NewWriterSize(a.w, 32<<10)
		sep = '['
	}
	_ = a.out.WriteByte(sep)
	_, err = a.out.Write(b)
	return err
}
