package server

import (
	"errors"
	"net/http"

	"github.com/agentd/agentd/internal/access"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/engine"
	"github.com/agentd/agentd/internal/store"
)

// What the user is asked while a run waits: permission requests and the
// question tool's questions, with the routes that answer them.

// permissionNotFound is opencode's answer for an unknown request.
func permissionNotFound(id string) *apiError {
	return tagged(http.StatusNotFound, "PermissionNotFoundError", "Permission request not found: "+id, map[string]string{"requestID": id})
}

// questionNotFound is opencode's answer for an unknown question.
func questionNotFound(id string) *apiError {
	return tagged(http.StatusNotFound, "QuestionNotFoundError", "Question request not found: "+id, map[string]string{"requestID": id})
}

func (s *Server) listPermissions(w http.ResponseWriter, r *http.Request) *apiError {
	list, err := s.st.PendingPermissions(r.Context(), "")
	if err == nil {
		list, err = access.Visible(r.Context(), s.cfg.Keys, list, func(p core.PermissionRequest) string { return p.SessionID })
	}
	if err != nil {
		return s.storeErr(err, "permissions")
	}
	out := make([]core.OpencodePermission, len(list))
	for i, p := range list {
		out[i] = p.Opencode()
	}
	writeList(w, r, out, false, nil)
	return nil
}

// permissionReplyBody answers a permission request.
type permissionReplyBody struct {
	Reply   string `json:"reply" doc:"required"`
	Message string `json:"message"`
}

func (s *Server) replyPermission(w http.ResponseWriter, r *http.Request) *apiError {
	var in permissionReplyBody
	if e := decodeJSON(r, &in, false); e != nil {
		return e
	}
	id := r.PathValue("requestID")
	if p, err := s.st.Permission(r.Context(), id); err == nil && !s.sees(r.Context(), p.SessionID) {
		return permissionNotFound(id)
	}
	if err := s.eng.Reply(r.Context(), id, in.Reply, in.Message); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return permissionNotFound(id)
		}
		return s.storeErr(err, "permission request "+id)
	}
	writeJSON(w, http.StatusOK, true)
	return nil
}

// permissionReplyV1Body answers a permission request on opencode's v1 route.
type permissionReplyV1Body struct {
	Response string `json:"response" doc:"required"`
}

func (s *Server) replyPermissionV1(w http.ResponseWriter, r *http.Request) *apiError {
	var in permissionReplyV1Body
	if e := decodeJSON(r, &in, false); e != nil {
		return e
	}
	id := r.PathValue("permissionID")
	if req, err := s.st.Permission(r.Context(), id); err != nil || req.SessionID != r.PathValue("id") {
		return permissionNotFound(id)
	}
	if err := s.eng.Reply(r.Context(), id, in.Response, ""); err != nil {
		return s.storeErr(err, "permission request "+id)
	}
	writeJSON(w, http.StatusOK, true)
	return nil
}

func (s *Server) listQuestions(w http.ResponseWriter, r *http.Request) *apiError {
	list, err := s.st.PendingQuestions(r.Context(), "")
	if err == nil {
		list, err = access.Visible(r.Context(), s.cfg.Keys, list, func(q core.QuestionRequest) string { return q.SessionID })
	}
	if err != nil {
		return s.storeErr(err, "questions")
	}
	out := make([]core.OpencodeQuestion, len(list))
	for i, q := range list {
		out[i] = q.Opencode()
	}
	writeList(w, r, out, false, nil)
	return nil
}

// questionReplyBody answers a question: per question, the labels chosen.
type questionReplyBody struct {
	Answers [][]string `json:"answers" doc:"required"`
}

func (s *Server) replyQuestion(w http.ResponseWriter, r *http.Request) *apiError {
	var in questionReplyBody
	if e := decodeJSON(r, &in, false); e != nil {
		return e
	}
	return s.answerQuestion(w, r, in.Answers, false)
}

func (s *Server) rejectQuestion(w http.ResponseWriter, r *http.Request) *apiError {
	return s.answerQuestion(w, r, nil, true)
}

func (s *Server) answerQuestion(w http.ResponseWriter, r *http.Request, answers [][]string, reject bool) *apiError {
	id := r.PathValue("requestID")
	if q, err := s.st.Question(r.Context(), id); err == nil && !s.sees(r.Context(), q.SessionID) {
		return questionNotFound(id)
	}
	err := s.eng.AnswerQuestion(r.Context(), id, answers, reject)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return questionNotFound(id)
	case errors.Is(err, engine.ErrQuestionAnswered):
		return &apiError{status: http.StatusConflict, name: "ConflictError", msg: err.Error()}
	case err != nil:
		return s.storeErr(err, "question "+id)
	}
	writeJSON(w, http.StatusOK, true)
	return nil
}
