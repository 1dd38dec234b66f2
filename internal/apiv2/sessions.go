package apiv2

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/access"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// Sessions: list, create, get, the running ones, and the switches of
// agent and model. Sessions are the v1 routes' rows: one made here is
// whole through /session and the other way round.

// sessionsPage is opencode 2's SessionsResponse.
type sessionsPage struct {
	Data   []sessionInfo `json:"data"`
	Cursor pageCursor    `json:"cursor"`
}

// pageCursor names the pages around an answer's, as opaque strings.
type pageCursor struct {
	Previous string `json:"previous,omitempty"`
	Next     string `json:"next,omitempty"`
}

// sessionCursor is where a page of sessions starts: after the session
// updated at U with id I, in order O.
type sessionCursor struct {
	U int64  `json:"u"`
	I string `json:"i"`
	O string `json:"o"`
}

func encodeCursor(v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string, v any) *apiError {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		return tagged(http.StatusBadRequest, "InvalidCursorError", "cursor: not a cursor of this list (take it from cursor.next or cursor.previous)")
	}
	return nil
}

// pageLimit reads ?limit= (1 to hi, default def).
func pageLimit(r *http.Request, def, hi int) (int, *apiError) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || n < 1 {
		return 0, invalid("limit: %q is not a positive number", v)
	}
	return min(int(n), hi), nil
}

// pageOrder reads ?order= (desc by default).
func pageOrder(r *http.Request) (string, *apiError) {
	switch o := r.URL.Query().Get("order"); o {
	case "", "desc":
		return "desc", nil
	case "asc":
		return o, nil
	default:
		return "", invalid("order: %q is not asc or desc", o)
	}
}

func (a *API) listSessions(w http.ResponseWriter, r *http.Request) *apiError {
	q := r.URL.Query()
	limit, e := pageLimit(r, 50, 200)
	if e != nil {
		return e
	}
	order, e := pageOrder(r)
	if e != nil {
		return e
	}
	var at *sessionCursor
	if c := q.Get("cursor"); c != "" {
		at = &sessionCursor{}
		if e := decodeCursor(c, at); e != nil {
			return e
		}
		order = at.O
	}
	sq := store.SessionQuery{Owner: access.ListOwner(r.Context())}
	if d := q.Get("directory"); d != "" {
		// Sessions keep their directory as resolved at creation.
		sq.Directory = filepath.Clean(d)
		if real, err := filepath.EvalSymlinks(d); err == nil {
			sq.Directory = real
		}
	}
	search := strings.ToLower(q.Get("search"))
	keep := func(s core.Session) bool { return search == "" || strings.Contains(strings.ToLower(s.Title), search) }
	list, more, err := a.sessionPage(r.Context(), sq, order, at, limit, keep)
	if err != nil {
		return a.storeErr(err, "")
	}
	out := sessionsPage{Data: make([]sessionInfo, 0, len(list))}
	for _, s := range list {
		st, err := a.st.SessionStatus(r.Context(), s.ID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return a.storeErr(err, s.ID)
		}
		out.Data = append(out.Data, infoOf(s, st))
	}
	if more && len(list) > 0 {
		last := list[len(list)-1]
		out.Cursor.Next = encodeCursor(sessionCursor{U: last.Time.Updated, I: last.ID, O: order})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// sessionPage reads the limit sessions keep keeps after the cursor, in
// order, and whether more follow. Newest first pages through the store;
// oldest first reads the list once (the store lists newest first).
func (a *API) sessionPage(ctx context.Context, sq store.SessionQuery, order string, at *sessionCursor, limit int,
	keep func(core.Session) bool) ([]core.Session, bool, error) {
	var out []core.Session
	if order == "asc" {
		all, err := a.st.Sessions(ctx, sq)
		if err != nil {
			return nil, false, err
		}
		slices.Reverse(all)
		for _, s := range all {
			if at != nil && (s.Time.Updated < at.U || s.Time.Updated == at.U && s.ID >= at.I) {
				continue
			}
			if keep(s) {
				out = append(out, s)
			}
		}
		return out[:min(len(out), limit)], len(out) > limit, nil
	}
	if at != nil {
		sq.AfterUpdated, sq.AfterID = at.U, at.I
	}
	batch := max(limit+1, 100)
	for {
		sq.Limit = batch
		list, err := a.st.Sessions(ctx, sq)
		if err != nil {
			return nil, false, err
		}
		for _, s := range list {
			if keep(s) {
				out = append(out, s)
			}
		}
		if len(out) > limit || len(list) < batch {
			return out[:min(len(out), limit)], len(out) > limit, nil
		}
		last := list[len(list)-1]
		sq.AfterUpdated, sq.AfterID = last.Time.Updated, last.ID
	}
}

// createBody is what POST /api/session takes.
type createBody struct {
	ID       string       `json:"id"`
	Agent    string       `json:"agent"`
	Model    *modelRef    `json:"model"`
	Location *locationRef `json:"location"`
}

func (a *API) createSession(w http.ResponseWriter, r *http.Request) *apiError {
	var in createBody
	if e := decode(r, &in, true); e != nil {
		return e
	}
	if in.ID != "" && !core.ValidID(core.PrefixSession, in.ID) {
		return invalid("id: %q is not a session id (ses_…)", in.ID)
	}
	if in.ID != "" {
		// A retried creation adopts the session it made (one another
		// key made is a conflict, as it would be had it been made in
		// between).
		if s, err := a.st.Session(r.Context(), in.ID); err == nil {
			if ok, err := a.cfg.Keys.Sees(r.Context(), s.ID); err != nil || !ok {
				return conflict("session " + in.ID + " exists")
			}
			return a.answerSession(w, r, s)
		}
	}
	dirName := ""
	if in.Location != nil {
		dirName = in.Location.Directory
	}
	dir, e := a.sessionDir(r, dirName)
	if e != nil {
		return e
	}
	if e := a.checkAgent(in.Agent); e != nil {
		return e
	}
	now := time.Now()
	sess := core.Session{ID: in.ID, ProjectID: "global", Directory: dir, Title: core.DefaultTitle(now), Version: a.cfg.Version,
		Agent: in.Agent, Time: core.SessionTime{Created: now.UnixMilli(), Updated: now.UnixMilli()}, Owner: access.Owner(r.Context())}
	if sess.ID == "" {
		sess.ID = core.NewID(core.PrefixSession, true)
	}
	sess.Slug = core.Slug(sess.ID)
	if in.Model != nil {
		if in.Model.ID == "" || in.Model.ProviderID == "" {
			return invalid("model: id and providerID are both required")
		}
		sess.Model = &core.SessionModel{ID: in.Model.ID, ProviderID: in.Model.ProviderID, Variant: in.Model.Variant}
	}
	err := a.st.Tx(r.Context(), func(tx store.Tx) error {
		if err := tx.InsertSession(r.Context(), sess); err != nil {
			return err
		}
		return tx.AppendEvent(r.Context(), core.MustEvent(sess.ID, core.EventSessionCreated, core.SessionProps{SessionID: sess.ID, Info: sess}))
	})
	if errors.Is(err, store.ErrConflict) {
		return conflict("session " + sess.ID + " exists")
	}
	if err != nil {
		return a.storeErr(err, sess.ID)
	}
	return a.answerSession(w, r, sess)
}

// sessionDir is a new session's directory: the one named (the body's
// location, else the request's), checked as the v1 routes check it.
func (a *API) sessionDir(r *http.Request, named string) (string, *apiError) {
	if named == "" {
		return a.reqDir(r)
	}
	real, err := a.cfg.Files.Dir(named)
	if err != nil {
		return "", fileErr(err, named)
	}
	return real, nil
}

// checkAgent refuses an agent the catalog does not list ("" is the
// default).
func (a *API) checkAgent(name string) *apiError {
	if name == "" || len(a.cfg.Catalog.Agents) == 0 {
		return nil
	}
	for _, ag := range a.cfg.Catalog.Agents {
		if ag.Name == name {
			return nil
		}
	}
	return invalid("agent: no agent %q (GET /api/agent lists them)", name)
}

// answerSession answers {data: session} with its status.
func (a *API) answerSession(w http.ResponseWriter, r *http.Request, s core.Session) *apiError {
	st, err := a.st.SessionStatus(r.Context(), s.ID)
	if err != nil {
		return a.storeErr(err, s.ID)
	}
	data(w, infoOf(s, st))
	return nil
}

func (a *API) getSession(w http.ResponseWriter, r *http.Request) *apiError {
	id := r.PathValue("sessionID")
	s, err := a.st.Session(r.Context(), id)
	if err != nil {
		return a.storeErr(err, id)
	}
	return a.answerSession(w, r, s)
}

// activeJSON is opencode 2's SessionActive.
type activeJSON struct {
	Type string `json:"type"`
}

// activeSessions lists the sessions that have a non-terminal run: the
// durable truth, not a memory map; absence means idle for a session that
// exists.
func (a *API) activeSessions(w http.ResponseWriter, r *http.Request) *apiError {
	st, err := a.st.ActiveStatuses(r.Context())
	if err == nil {
		st, err = access.VisibleMap(r.Context(), a.cfg.Keys, st)
	}
	if err != nil {
		return a.storeErr(err, "")
	}
	out := make(map[string]activeJSON, len(st))
	for id := range st {
		out[id] = activeJSON{Type: "running"}
	}
	data(w, out)
	return nil
}

type agentBody struct {
	Agent string `json:"agent" doc:"required"`
}

type modelBody struct {
	Model *modelRef `json:"model" doc:"required"`
}

func (a *API) switchAgent(w http.ResponseWriter, r *http.Request) *apiError {
	var in agentBody
	if e := decode(r, &in, false); e != nil {
		return e
	}
	if in.Agent == "" {
		return invalid("agent: required")
	}
	if e := a.checkAgent(in.Agent); e != nil {
		return e
	}
	return a.updateSession(w, r, func(s *core.Session) { s.Agent = in.Agent })
}

func (a *API) switchModel(w http.ResponseWriter, r *http.Request) *apiError {
	var in modelBody
	if e := decode(r, &in, false); e != nil {
		return e
	}
	if in.Model == nil || in.Model.ID == "" || in.Model.ProviderID == "" {
		return invalid("model: id and providerID are both required")
	}
	m := core.SessionModel{ID: in.Model.ID, ProviderID: in.Model.ProviderID, Variant: in.Model.Variant}
	return a.updateSession(w, r, func(s *core.Session) { s.Model = &m })
}

// updateSession changes a session as v1's PATCH does: the row and its
// session.updated, in one transaction.
func (a *API) updateSession(w http.ResponseWriter, r *http.Request, change func(*core.Session)) *apiError {
	id := r.PathValue("sessionID")
	err := a.st.Tx(r.Context(), func(tx store.Tx) error {
		if err := tx.LockSession(r.Context(), id); err != nil {
			return err
		}
		s, err := tx.Session(r.Context(), id)
		if err != nil {
			return err
		}
		change(&s)
		s.Time.Updated = time.Now().UnixMilli()
		if err := tx.UpdateSession(r.Context(), s); err != nil {
			return err
		}
		return tx.AppendEvent(r.Context(), core.MustEvent(id, core.EventSessionUpdated, core.SessionProps{SessionID: id, Info: s}))
	})
	if err != nil {
		return a.storeErr(err, id)
	}
	noContent(w)
	return nil
}
