package server

import (
	"errors"
	"net/http"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/msgedit"
)

// A client's deletes and changes of messages and parts (package msgedit):
// tombstones, never while a run reads the history.

// editErr maps msgedit's errors.
func (s *Server) editErr(err error, what string) *apiError {
	var busy *msgedit.BusyError
	var refused *msgedit.RefusedError
	switch {
	case errors.As(err, &busy):
		return tagged(http.StatusConflict, "SessionBusyError", busy.Error(), map[string]string{"sessionID": busy.SessionID})
	case errors.As(err, &refused):
		return badRequest("%s", refused.Msg)
	}
	return s.storeErr(err, what)
}

func (s *Server) deleteMessage(w http.ResponseWriter, r *http.Request) *apiError {
	mid := r.PathValue("messageID")
	if err := msgedit.DeleteMessage(r.Context(), s.st, r.PathValue("id"), mid); err != nil {
		return s.editErr(err, "message "+mid)
	}
	writeJSON(w, http.StatusOK, true)
	return nil
}

func (s *Server) deletePart(w http.ResponseWriter, r *http.Request) *apiError {
	pid := r.PathValue("partID")
	if err := msgedit.DeletePart(r.Context(), s.st, r.PathValue("id"), r.PathValue("messageID"), pid); err != nil {
		return s.editErr(err, "part "+pid)
	}
	writeJSON(w, http.StatusOK, true)
	return nil
}

// updatePart takes opencode's whole Part; only the text of a text or
// reasoning part changes (see msgedit.UpdatePart), and the answer is the
// part as stored.
func (s *Server) updatePart(w http.ResponseWriter, r *http.Request) *apiError {
	var p core.Part
	if e := decodeJSON(r, &p, false); e != nil {
		return e
	}
	for _, f := range []struct{ name, got, want string }{
		{"id", p.ID, r.PathValue("partID")},
		{"messageID", p.MessageID, r.PathValue("messageID")},
		{"sessionID", p.SessionID, r.PathValue("id")},
	} {
		if f.got != "" && f.got != f.want {
			return badRequest("%s %q does not match the path's %q", f.name, f.got, f.want)
		}
	}
	p.ID, p.MessageID, p.SessionID = r.PathValue("partID"), r.PathValue("messageID"), r.PathValue("id")
	out, err := msgedit.UpdatePart(r.Context(), s.st, p)
	if err != nil {
		return s.editErr(err, "part "+p.ID)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
