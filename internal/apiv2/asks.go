package apiv2

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"

	"github.com/agentd/agentd/internal/access"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/engine"
	"github.com/agentd/agentd/internal/store"
)

// What the user is asked while a run waits — permission requests and the
// question tool's questions — in opencode 2's shapes, answered through
// the engine as the v1 routes answer them; and the saved approvals, which
// are the sessions' rules granted by "always" answers.

// permissionJSON is opencode 2's PermissionV2.Request.
type permissionJSON struct {
	ID        string         `json:"id"`
	SessionID string         `json:"sessionID"`
	Action    string         `json:"action"`
	Resources []string       `json:"resources"`
	Save      []string       `json:"save,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
	Source    *sourceJSON    `json:"source,omitempty"`
}

type sourceJSON struct {
	Type      string `json:"type"`
	MessageID string `json:"messageID"`
	CallID    string `json:"callID"`
}

func permissionOf(p core.PermissionRequest) permissionJSON {
	out := permissionJSON{ID: p.ID, SessionID: p.SessionID, Action: p.Permission, Resources: p.Patterns, Save: p.Always,
		Metadata: p.Metadata}
	if out.Resources == nil {
		out.Resources = []string{}
	}
	if p.Tool != nil {
		out.Source = &sourceJSON{Type: "tool", MessageID: p.Tool.MessageID, CallID: p.Tool.CallID}
	}
	return out
}

func permissionNotFound(id string) *apiError {
	return tagged(http.StatusNotFound, "PermissionNotFoundError", "Permission request not found: "+id, "requestID", id)
}

func questionNotFound(id string) *apiError {
	return tagged(http.StatusNotFound, "QuestionNotFoundError", "Question request not found: "+id, "requestID", id)
}

func (a *API) listPermissions(w http.ResponseWriter, r *http.Request) *apiError {
	list, err := a.st.PendingPermissions(r.Context(), "")
	if err == nil {
		list, err = access.Visible(r.Context(), a.cfg.Keys, list, func(p core.PermissionRequest) string { return p.SessionID })
	}
	if err != nil {
		return a.storeErr(err, "")
	}
	return a.located(w, r, func(string) any {
		out := make([]permissionJSON, len(list))
		for i, p := range list {
			out[i] = permissionOf(p)
		}
		return out
	})
}

func (a *API) sessionPermissions(w http.ResponseWriter, r *http.Request) *apiError {
	sid := r.PathValue("sessionID")
	if _, err := a.st.Session(r.Context(), sid); err != nil {
		return a.storeErr(err, sid)
	}
	list, err := a.st.PendingPermissions(r.Context(), sid)
	if err != nil {
		return a.storeErr(err, sid)
	}
	out := make([]permissionJSON, len(list))
	for i, p := range list {
		out[i] = permissionOf(p)
	}
	data(w, out)
	return nil
}

// sessionPermission reads a pending request of the session: the session's
// 404 when it does not exist, the request's when it is not the session's
// or has been answered.
func (a *API) sessionPermission(r *http.Request) (core.PermissionRequest, *apiError) {
	sid, id := r.PathValue("sessionID"), r.PathValue("requestID")
	if _, err := a.st.Session(r.Context(), sid); err != nil {
		return core.PermissionRequest{}, a.storeErr(err, sid)
	}
	p, err := a.st.Permission(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) || err == nil && (p.SessionID != sid || p.Reply != "") {
		return p, permissionNotFound(id)
	}
	if err != nil {
		return p, a.storeErr(err, sid)
	}
	return p, nil
}

func (a *API) getPermission(w http.ResponseWriter, r *http.Request) *apiError {
	p, e := a.sessionPermission(r)
	if e != nil {
		return e
	}
	data(w, permissionOf(p))
	return nil
}

type replyBody struct {
	Reply   string `json:"reply" doc:"required"`
	Message string `json:"message"`
}

func (a *API) replyPermission(w http.ResponseWriter, r *http.Request) *apiError {
	var in replyBody
	if e := decode(r, &in, false); e != nil {
		return e
	}
	switch in.Reply {
	case core.ReplyOnce, core.ReplyAlways, core.ReplyReject:
	default:
		return invalid("reply: %q is not once, always or reject", in.Reply)
	}
	p, e := a.sessionPermission(r)
	if e != nil {
		return e
	}
	if err := a.eng.Reply(r.Context(), p.ID, in.Reply, in.Message); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return permissionNotFound(p.ID)
		}
		return a.storeErr(err, p.SessionID)
	}
	noContent(w)
	return nil
}

// permissionBody is a permission a client asks about.
type permissionBody struct {
	ID        string         `json:"id"`
	Action    string         `json:"action" doc:"required"`
	Resources []string       `json:"resources" doc:"required"`
	Save      []string       `json:"save"`
	Metadata  map[string]any `json:"metadata"`
	Source    *sourceJSON    `json:"source"`
	Agent     string         `json:"agent"`
}

type decisionJSON struct {
	ID     string `json:"id"`
	Effect string `json:"effect"`
}

// createPermission decides a permission as the session's tool calls are
// decided (the operator's, the agent's, the session's and the granted
// rules). agentd asks its users only for its own tool calls, so an "ask"
// is the client's to put to its user; no request is kept.
func (a *API) createPermission(w http.ResponseWriter, r *http.Request) *apiError {
	sid := r.PathValue("sessionID")
	var in permissionBody
	if e := decode(r, &in, false); e != nil {
		return e
	}
	if in.Action == "" || len(in.Resources) == 0 {
		return invalid("action and resources are required")
	}
	if in.ID != "" && !core.ValidID(core.PrefixPermission, in.ID) {
		return invalid("id: %q is not a permission id (per_…)", in.ID)
	}
	effect, err := a.eng.Decide(r.Context(), sid, in.Agent, in.Action, in.Resources)
	if err != nil {
		return a.storeErr(err, sid)
	}
	id := in.ID
	if id == "" {
		id = core.NewID(core.PrefixPermission, false)
	}
	data(w, decisionJSON{ID: id, Effect: effect})
	return nil
}

// savedJSON is opencode 2's PermissionSaved.Info: a rule an "always"
// answer granted a session. Its id names the session and the rule.
type savedJSON struct {
	ID        string `json:"id"`
	ProjectID string `json:"projectID"`
	Action    string `json:"action"`
	Resource  string `json:"resource"`
}

// savedID names a granted rule of a session.
func savedID(sid string, rule core.Rule) string {
	sum := sha256.Sum256([]byte(rule.Permission + "\x00" + rule.Pattern))
	return sid + "." + hex.EncodeToString(sum[:8])
}

func (a *API) listSaved(w http.ResponseWriter, r *http.Request) *apiError {
	out := []savedJSON{}
	if p := r.URL.Query().Get("projectID"); p != "" && p != "global" {
		data(w, out)
		return nil
	}
	list, err := a.st.Sessions(r.Context(), store.SessionQuery{Owner: access.ListOwner(r.Context())})
	if err != nil {
		return a.storeErr(err, "")
	}
	for _, s := range list {
		for _, rule := range s.Granted {
			out = append(out, savedJSON{ID: savedID(s.ID, rule), ProjectID: "global", Action: rule.Permission, Resource: rule.Pattern})
		}
	}
	data(w, out)
	return nil
}

// removeSaved withdraws a granted rule: the session's next call that
// needs it is asked again. An id that names no rule is not an error.
func (a *API) removeSaved(w http.ResponseWriter, r *http.Request) *apiError {
	id := r.PathValue("id")
	sid, _, ok := strings.Cut(id, ".")
	if !ok || !core.ValidID(core.PrefixSession, sid) {
		return invalid("id: %q is not a saved permission's id", id)
	}
	if ok, err := a.cfg.Keys.Sees(r.Context(), sid); err != nil || !ok {
		// Another key's session: as for an id that names no rule.
		noContent(w)
		return nil
	}
	err := a.st.Tx(r.Context(), func(tx store.Tx) error {
		if err := tx.LockSession(r.Context(), sid); err != nil {
			return err
		}
		s, err := tx.Session(r.Context(), sid)
		if err != nil {
			return err
		}
		kept := s.Granted[:0]
		for _, rule := range s.Granted {
			if savedID(sid, rule) != id {
				kept = append(kept, rule)
			}
		}
		if len(kept) == len(s.Granted) {
			return nil
		}
		s.Granted = kept
		if err := tx.UpdateSession(r.Context(), s); err != nil {
			return err
		}
		return tx.AppendEvent(r.Context(), core.MustEvent(sid, core.EventSessionUpdated, core.SessionProps{SessionID: sid, Info: s}))
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return a.storeErr(err, sid)
	}
	noContent(w)
	return nil
}

// questionJSON is opencode 2's QuestionV2.Request (v1's shape).
type questionJSON = core.OpencodeQuestion

func (a *API) listQuestions(w http.ResponseWriter, r *http.Request) *apiError {
	list, err := a.st.PendingQuestions(r.Context(), "")
	if err == nil {
		list, err = access.Visible(r.Context(), a.cfg.Keys, list, func(q core.QuestionRequest) string { return q.SessionID })
	}
	if err != nil {
		return a.storeErr(err, "")
	}
	return a.located(w, r, func(string) any { return questionsOf(list) })
}

func questionsOf(list []core.QuestionRequest) []questionJSON {
	out := make([]questionJSON, len(list))
	for i, q := range list {
		out[i] = q.Opencode()
	}
	return out
}

func (a *API) sessionQuestions(w http.ResponseWriter, r *http.Request) *apiError {
	sid := r.PathValue("sessionID")
	if _, err := a.st.Session(r.Context(), sid); err != nil {
		return a.storeErr(err, sid)
	}
	list, err := a.st.PendingQuestions(r.Context(), sid)
	if err != nil {
		return a.storeErr(err, sid)
	}
	data(w, questionsOf(list))
	return nil
}

type answersBody struct {
	Answers [][]string `json:"answers" doc:"required"`
}

func (a *API) replyQuestion(w http.ResponseWriter, r *http.Request) *apiError {
	var in answersBody
	if e := decode(r, &in, false); e != nil {
		return e
	}
	if in.Answers == nil {
		return invalid("answers: required")
	}
	return a.answerQuestion(w, r, in.Answers, false)
}

func (a *API) rejectQuestion(w http.ResponseWriter, r *http.Request) *apiError {
	return a.answerQuestion(w, r, nil, true)
}

func (a *API) answerQuestion(w http.ResponseWriter, r *http.Request, answers [][]string, reject bool) *apiError {
	sid, id := r.PathValue("sessionID"), r.PathValue("requestID")
	if _, err := a.st.Session(r.Context(), sid); err != nil {
		return a.storeErr(err, sid)
	}
	if q, err := a.st.Question(r.Context(), id); err != nil || q.SessionID != sid {
		return questionNotFound(id)
	}
	err := a.eng.AnswerQuestion(r.Context(), id, answers, reject)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return questionNotFound(id)
	case errors.Is(err, engine.ErrQuestionAnswered):
		return conflict(err.Error())
	case err != nil:
		return a.storeErr(err, sid)
	}
	noContent(w)
	return nil
}
