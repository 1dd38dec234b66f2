package server

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/access"
	"github.com/agentd/agentd/internal/budget"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// budgetOf is the budget a session gets from caps a client set: nil when
// they cap nothing, else the caps with what the session spent.
func budgetOf(caps core.Budget, sess core.Session) *core.Budget {
	if caps.Tokens == 0 && caps.Cost == 0 {
		return nil
	}
	b := &core.Budget{Tokens: caps.Tokens, Cost: caps.Cost}
	b.Note(sess.Tokens, sess.Cost)
	return b
}

func queryInt(r *http.Request, name string, def, lo, hi int) (int, *apiError) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, badRequest("%s: %q is not an integer", name, v)
	}
	return min(max(n, lo), hi), nil
}

// listSessions lists sessions, newest first, with opencode's filters:
// directory (or the x-opencode-directory header), roots (no parent),
// start (updated at or after, epoch ms), search (in the title) and limit.
func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) *apiError {
	qv := r.URL.Query()
	limit, e := queryInt(r, "limit", defaultPage, 1, maxPage)
	if e != nil {
		return e
	}
	start, e := queryInt(r, "start", 0, 0, math.MaxInt)
	if e != nil {
		return e
	}
	roots := qv.Get("roots") == "true"
	search := strings.ToLower(qv.Get("search"))
	q := store.SessionQuery{Owner: access.ListOwner(r.Context())}
	if c := qv.Get("cursor"); c != "" {
		at, id, ok := strings.Cut(c, ".")
		n, err := strconv.ParseInt(at, 10, 64)
		if !ok || err != nil || !core.ValidID(core.PrefixSession, id) {
			return badRequest("cursor: %q is not a cursor of this list (take it from the Link header)", c)
		}
		q.AfterUpdated, q.AfterID = n, id
	}
	if !roots && start == 0 && search == "" {
		q.Limit = limit
	}
	if qv.Get("directory") != "" || r.Header.Get("x-opencode-directory") != "" {
		if q.Directory, e = s.directory(r); e != nil {
			return e
		}
	}
	list, err := s.st.Sessions(r.Context(), q)
	if err != nil {
		return s.storeErr(err, "sessions")
	}
	out := list[:0]
	for _, sess := range list {
		switch {
		case roots && sess.ParentID != "":
		case sess.Time.Updated < int64(start):
		case search != "" && !strings.Contains(strings.ToLower(sess.Title), search):
		default:
			out = append(out, sess)
		}
		if limit > 0 && len(out) == limit {
			break
		}
	}
	writeList(w, r, out, false, func(q url.Values, last core.Session) {
		q.Set("cursor", strconv.FormatInt(last.Time.Updated, 10)+"."+last.ID)
	})
	return nil
}

type sessionInput struct {
	ParentID   *string            `json:"parentID"`
	Title      *string            `json:"title"`
	Metadata   map[string]any     `json:"metadata"`
	Permission []core.Rule        `json:"permission"`
	Agent      string             `json:"agent"`
	Model      *core.SessionModel `json:"model"`
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request) *apiError {
	var in sessionInput
	if e := decodeJSON(r, &in, true); e != nil {
		return e
	}
	dir, e := s.directory(r)
	if e != nil {
		return e
	}
	if r.URL.Query().Get("directory") != "" || r.Header.Get("x-opencode-directory") != "" {
		// A client's directory must be a real workspace; the server's own
		// is its working directory.
		if dir, e = workspaceDir(dir); e != nil {
			return e
		}
	} else if real, err := filepath.EvalSymlinks(dir); err == nil && real == string(filepath.Separator) {
		return badRequest("directory: the server runs in %s, the filesystem's root, which cannot be a workspace; name a project's directory (?directory= or x-opencode-directory)", dir)
	}
	now := time.Now()
	sess := core.Session{
		ID: core.NewID(core.PrefixSession, true), ProjectID: "global", Directory: dir,
		Title:   core.DefaultTitle(now),
		Version: s.cfg.Version, Metadata: in.Metadata,
		Time:  core.SessionTime{Created: now.UnixMilli(), Updated: now.UnixMilli()},
		Owner: access.Owner(r.Context()),
	}
	sess.Slug = core.Slug(sess.ID)
	if e := validRules(in.Permission); e != nil {
		return e
	}
	sess.Permission = in.Permission
	sess.Agent = in.Agent
	if in.Model != nil {
		if in.Model.ProviderID == "" || in.Model.ID == "" {
			return badRequest("model: providerID and id are both required")
		}
		m := *in.Model
		sess.Model = &m
	}
	if e := checkMetadata(in.Metadata); e != nil {
		return e
	}
	if in.Title != nil {
		if strings.TrimSpace(*in.Title) == "" {
			return badRequest("title: must not be empty")
		}
		if e := checkTitle(in.Title); e != nil {
			return e
		}
		sess.Title = *in.Title
	}
	err := s.st.Tx(r.Context(), func(tx store.Tx) error {
		if in.ParentID != nil && *in.ParentID != "" {
			if _, err := tx.Session(r.Context(), *in.ParentID); err != nil || !s.sees(r.Context(), *in.ParentID) {
				if err == nil || errors.Is(err, store.ErrNotFound) {
					return badRequest("parentID: session %s does not exist", *in.ParentID)
				}
				return err
			}
			sess.ParentID = *in.ParentID
		}
		if err := tx.InsertSession(r.Context(), sess); err != nil {
			return err
		}
		err := tx.AppendEvent(r.Context(), core.MustEvent(sess.ID, core.EventSessionCreated, core.SessionProps{SessionID: sess.ID, Info: sess}))
		return err
	})
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	if err != nil {
		return s.storeErr(err, "session")
	}
	writeJSON(w, http.StatusOK, sess)
	return nil
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) *apiError {
	sess, err := s.st.Session(r.Context(), r.PathValue("id"))
	if err != nil {
		return s.storeErr(err, "session "+r.PathValue("id"))
	}
	writeJSON(w, http.StatusOK, sess)
	return nil
}

// updateSessionBody is what PATCH /session/{id} changes. Budget caps the
// session's spend (agentd's own; {} or zero figures lift the caps).
type updateSessionBody struct {
	Title    *string        `json:"title"`
	Metadata map[string]any `json:"metadata"`
	Budget   *core.Budget   `json:"budget"`
}

func (s *Server) updateSession(w http.ResponseWriter, r *http.Request) *apiError {
	var in updateSessionBody
	if e := decodeJSON(r, &in, false); e != nil {
		return e
	}
	if in.Title != nil && strings.TrimSpace(*in.Title) == "" {
		return badRequest("title: must not be empty")
	}
	if e := checkTitle(in.Title); e != nil {
		return e
	}
	if e := checkMetadata(in.Metadata); e != nil {
		return e
	}
	if in.Budget != nil {
		if err := budget.Valid(*in.Budget); err != nil {
			return badRequest("%v", err)
		}
	}
	id := r.PathValue("id")
	var out core.Session
	var refused *apiError
	err := s.st.Tx(r.Context(), func(tx store.Tx) error {
		sess, err := tx.Session(r.Context(), id)
		if err != nil {
			return err
		}
		if refused = keyMayBudget(r.Context(), in.Budget, sess.Budget); refused != nil {
			return refused
		}
		if in.Title != nil {
			sess.Title = *in.Title
		}
		if in.Metadata != nil {
			sess.Metadata = in.Metadata
		}
		if in.Budget != nil {
			sess.Budget = budgetOf(*in.Budget, sess)
		}
		sess.Time.Updated = time.Now().UnixMilli()
		if err := tx.UpdateSession(r.Context(), sess); err != nil {
			return err
		}
		out = sess
		err = tx.AppendEvent(r.Context(), core.MustEvent(sess.ID, core.EventSessionUpdated, core.SessionProps{SessionID: sess.ID, Info: sess}))
		return err
	})
	if refused != nil {
		return refused
	}
	if err != nil {
		return s.storeErr(err, "session "+id)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// keyMayBudget refuses a key's change of a session's budget that raises
// or lifts a cap: the caps bind the key (it may set them where there are
// none, or lower them); the operator changes them as it likes.
func keyMayBudget(ctx context.Context, next, prev *core.Budget) *apiError {
	if next == nil || prev == nil || access.CallerOf(ctx) == nil || budget.Within(*next, *prev) {
		return nil
	}
	return &apiError{status: http.StatusForbidden, name: "ForbiddenError",
		msg: "an API key may lower a session's budget, not raise or lift it: ask the operator"}
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) *apiError {
	id := r.PathValue("id")
	if _, err := s.eng.Abort(r.Context(), id); err != nil {
		return s.storeErr(err, "session "+id)
	}
	err := s.st.Tx(r.Context(), func(tx store.Tx) error {
		sess, err := tx.Session(r.Context(), id)
		if err != nil {
			return err
		}
		if err := tx.DeleteSession(r.Context(), id); err != nil {
			return err
		}
		err = tx.AppendEvent(r.Context(), core.MustEvent(id, core.EventSessionDeleted, core.SessionProps{SessionID: id, Info: sess}))
		return err
	})
	if err != nil {
		return s.storeErr(err, "session "+id)
	}
	writeJSON(w, http.StatusOK, true)
	return nil
}

// listMessages answers a session's newest messages, oldest first; past
// listBytes the oldest are left to the next page (?before=).
func (s *Server) listMessages(w http.ResponseWriter, r *http.Request) *apiError {
	return sessionList(s, w, r, "messages", func(ctx context.Context, id string, limit int) ([]core.MessageWithParts, error) {
		// The store stops reading past twice the answer's budget, so
		// that what it holds in memory is bounded too.
		return s.st.Messages(ctx, id, store.MessageQuery{Limit: limit, Before: r.URL.Query().Get("before"), MaxBytes: 2 * listBytes})
	}, true, func(q url.Values, oldest core.MessageWithParts) { q.Set("before", oldest.Info.ID) })
}

// Page sizes of the list routes: without a limit a list holds the newest
// defaultPage items; no limit lifts it past maxPage. Older items are read
// with before= (messages) or start= (sessions).
const (
	defaultPage = 1000
	maxPage     = 10000
)

// sessionList answers a ?limit= listing under /session/{id}: 404 for an
// unknown session, a JSON array (never null) otherwise, within listBytes
// (see writeList for keepTail and next).
func sessionList[T any](s *Server, w http.ResponseWriter, r *http.Request, what string,
	list func(ctx context.Context, sessionID string, limit int) ([]T, error), keepTail bool, next func(url.Values, T)) *apiError {
	id := r.PathValue("id")
	limit, e := queryInt(r, "limit", defaultPage, 1, maxPage)
	if e != nil {
		return e
	}
	if _, err := s.st.Session(r.Context(), id); err != nil {
		return s.storeErr(err, "session "+id)
	}
	items, err := list(r.Context(), id, limit)
	if err != nil {
		return s.storeErr(err, what)
	}
	writeList(w, r, items, keepTail, next)
	return nil
}

func (s *Server) getMessage(w http.ResponseWriter, r *http.Request) *apiError {
	m, err := s.st.Message(r.Context(), r.PathValue("id"), r.PathValue("messageID"))
	if err != nil {
		return s.storeErr(err, "message "+r.PathValue("messageID"))
	}
	writeJSON(w, http.StatusOK, m)
	return nil
}

func (s *Server) abort(w http.ResponseWriter, r *http.Request) *apiError {
	ok, err := s.eng.Abort(r.Context(), r.PathValue("id"))
	if err != nil {
		return s.storeErr(err, "session "+r.PathValue("id"))
	}
	writeJSON(w, http.StatusOK, ok)
	return nil
}

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) *apiError {
	return sessionList(s, w, r, "runs", s.st.Runs, false, nil)
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request) *apiError {
	run, err := s.st.Run(r.Context(), r.PathValue("runID"))
	if err == nil && run.SessionID != r.PathValue("id") {
		err = store.ErrNotFound
	}
	if err != nil {
		return s.storeErr(err, "run "+r.PathValue("runID"))
	}
	writeJSON(w, http.StatusOK, run)
	return nil
}
