package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/command"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/engine"
	"github.com/agentd/agentd/internal/events"
	"github.com/agentd/agentd/internal/store"
)

// health answers healthy while the node can keep what it is given; once
// its storage is lost (the database file deleted or replaced) it answers
// 503 with the reason.
func (s *Server) health(w http.ResponseWriter, r *http.Request) *apiError {
	if s.cfg.Unhealthy != nil {
		if err := s.cfg.Unhealthy(); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, healthJSON{Healthy: false, Version: s.cfg.Version, Error: err.Error()})
			return nil
		}
	}
	writeJSON(w, http.StatusOK, healthJSON{Healthy: true, Version: s.cfg.Version})
	return nil
}

// node answers GET /node. opencode's health schema admits no other field,
// so what a cluster's operator needs is here.
func (s *Server) node(w http.ResponseWriter, r *http.Request) *apiError {
	leases := 0
	if s.cfg.Node.Leases != nil {
		leases = s.cfg.Node.Leases()
	}
	writeJSON(w, http.StatusOK, nodeJSON{Node: s.cfg.Node.ID, Database: s.cfg.Node.Database, Leases: leases, Version: s.cfg.Version})
	return nil
}

// directory returns the workspace a request selects: ?directory=, then the
// x-opencode-directory header (which opencode's SDK percent-encodes),
// then the server's own directory.
func (s *Server) directory(r *http.Request) (string, *apiError) {
	d := r.URL.Query().Get("directory")
	if d == "" {
		d = r.Header.Get("x-opencode-directory")
	}
	if !filepath.IsAbs(d) {
		// opencode's SDK percent-encodes the directory it sends.
		if u, err := url.PathUnescape(d); err == nil {
			d = u
		}
	}
	if d == "" {
		return s.cfg.Directory, nil
	}
	if strings.ContainsRune(d, 0) || !filepath.IsAbs(d) {
		return "", badRequest("directory: %q must be an absolute path", d)
	}
	return filepath.Clean(d), nil
}

// workspaceDir checks that dir can be a session's workspace and returns it
// as it will be used: an existing directory, its symlinks resolved, that
// is not the filesystem's root or a kernel's file system (/proc, /sys,
// /dev), where every tool would reach the whole machine.
func workspaceDir(dir string) (string, *apiError) {
	real, err := filepath.EvalSymlinks(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", badRequest("directory: %s does not exist", dir)
	case err != nil:
		return "", badRequest("directory: %s: %v", dir, err)
	}
	if real == string(filepath.Separator) {
		return "", badRequest("directory: %s is the filesystem's root, which cannot be a workspace; choose a project's directory", dir)
	}
	for _, sys := range []string{"/proc", "/sys", "/dev"} {
		if real == sys || strings.HasPrefix(real, sys+"/") {
			return "", badRequest("directory: %s is in %s, which cannot be a workspace", dir, sys)
		}
	}
	st, err := os.Stat(real)
	switch {
	case err != nil:
		return "", badRequest("directory: %s: %v", dir, err)
	case !st.IsDir():
		return "", badRequest("directory: %s is not a directory", dir)
	}
	return real, nil
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
	q := store.SessionQuery{}
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
		Time: core.SessionTime{Created: now.UnixMilli(), Updated: now.UnixMilli()},
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
			if _, err := tx.Session(r.Context(), *in.ParentID); err != nil {
				if errors.Is(err, store.ErrNotFound) {
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

// updateSessionBody is what PATCH /session/{id} changes.
type updateSessionBody struct {
	Title    *string        `json:"title"`
	Metadata map[string]any `json:"metadata"`
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
	id := r.PathValue("id")
	var out core.Session
	err := s.st.Tx(r.Context(), func(tx store.Tx) error {
		sess, err := tx.Session(r.Context(), id)
		if err != nil {
			return err
		}
		if in.Title != nil {
			sess.Title = *in.Title
		}
		if in.Metadata != nil {
			sess.Metadata = in.Metadata
		}
		sess.Time.Updated = time.Now().UnixMilli()
		if err := tx.UpdateSession(r.Context(), sess); err != nil {
			return err
		}
		out = sess
		err = tx.AppendEvent(r.Context(), core.MustEvent(sess.ID, core.EventSessionUpdated, core.SessionProps{SessionID: sess.ID, Info: sess}))
		return err
	})
	if err != nil {
		return s.storeErr(err, "session "+id)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
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

// listStatus is opencode's status map: sessions with a non-terminal run,
// in opencode's strict status shape.
func (s *Server) listStatus(w http.ResponseWriter, r *http.Request) *apiError {
	m, err := s.st.ActiveStatuses(r.Context())
	if err != nil {
		return s.storeErr(err, "status")
	}
	writeRaw(w, http.StatusOK, appendStatusList(nil, m))
	return nil
}

// appendStatusList appends opencode's status map, sorted by session id.
// Written by hand because pollers read it in a loop: the reflecting
// encoder was a fifth of the route's cost with 100 busy sessions.
func appendStatusList(b []byte, m map[string]core.SessionStatus) []byte {
	ids := slices.Sorted(maps.Keys(m))
	b = append(b, '{')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, id)
		b = append(b, ':')
		switch st := m[id]; st.Type {
		case core.StatusBusy, core.StatusIdle:
			b = append(b, `{"type":"`...)
			b = append(b, st.Type...)
			b = append(b, `"}`...)
		default:
			v, _ := json.Marshal(st.Opencode())
			b = append(b, v...)
		}
	}
	return append(b, '}', '\n')
}

// appendJSONString appends s as a JSON string, directly when it needs no
// escaping (agentd's ids never do).
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			v, _ := json.Marshal(s)
			return append(b, v...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// listActive is agentd's status map: the same sessions with the full
// status (run id, since, phase).
func (s *Server) listActive(w http.ResponseWriter, r *http.Request) *apiError {
	m, err := s.st.ActiveStatuses(r.Context())
	if err != nil {
		return s.storeErr(err, "status")
	}
	writeJSON(w, http.StatusOK, m)
	return nil
}

func (s *Server) sessionStatus(w http.ResponseWriter, r *http.Request) *apiError {
	b, err := s.st.SessionStatusJSON(r.Context(), r.PathValue("id"))
	if err != nil {
		return s.storeErr(err, "session "+r.PathValue("id"))
	}
	writeRaw(w, http.StatusOK, append(b, '\n'))
	return nil
}

// parseTimeout reads ?timeout= as a Go duration ("30s") or a number of
// seconds, clamped to [0, max].
func parseTimeout(r *http.Request, def, maxD time.Duration) (time.Duration, *apiError) {
	v := r.URL.Query().Get("timeout")
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		f, ferr := strconv.ParseFloat(v, 64)
		if ferr != nil || f != f {
			return 0, badRequest("timeout: %q is neither a duration (30s) nor a number of seconds", v)
		}
		if f > maxD.Seconds() {
			f = maxD.Seconds()
		}
		d = time.Duration(f * float64(time.Second))
	}
	if d < 0 {
		return 0, badRequest("timeout: %q is negative", v)
	}
	return min(d, maxD), nil
}

func (s *Server) wait(w http.ResponseWriter, r *http.Request) *apiError {
	timeout, e := parseTimeout(r, 30*time.Second, 10*time.Minute)
	if e != nil {
		return e
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	st, err := s.eng.WaitIdle(ctx, r.PathValue("id"), r.URL.Query().Get("run"))
	if errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil {
		writeJSON(w, http.StatusRequestTimeout, st)
		return nil
	}
	if err != nil {
		return s.storeErr(err, "session or run")
	}
	writeJSON(w, http.StatusOK, st)
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

type promptBody struct {
	MessageID string             `json:"messageID"`
	Model     *core.ModelRef     `json:"model"`
	Agent     string             `json:"agent"`
	NoReply   bool               `json:"noReply"`
	System    string             `json:"system"`
	Parts     []engine.InputPart `json:"parts" doc:"required"`
	Busy      string             `json:"busy"`
	Variant   string             `json:"variant"`
	Format    *core.OutputFormat `json:"format"`
}

func (s *Server) admit(r *http.Request) (engine.Admission, *apiError) {
	var in promptBody
	if e := decodeJSON(r, &in, false); e != nil {
		return engine.Admission{}, e
	}
	policy := in.Busy
	if q := r.URL.Query().Get("busy"); q != "" {
		policy = q
	}
	adm, err := s.eng.Prompt(r.Context(), r.PathValue("id"), engine.PromptInput{
		MessageID: in.MessageID, Parts: in.Parts, Model: in.Model, Agent: in.Agent,
		System: in.System, Policy: policy, NoReply: in.NoReply, Variant: in.Variant, Format: in.Format,
	})
	if err != nil {
		return adm, s.storeErr(err, "session "+r.PathValue("id"))
	}
	return adm, nil
}

// prompt admits a prompt and answers when its run has ended: with the
// run's last assistant message when it succeeded or was interrupted, and
// with the run's error (502 for a provider's, 500 otherwise) when it
// failed, so that a client that only looks at the status code (opencode
// run) does not report a failure as a success. A client that goes away
// before the end aborts the run it started: the request owns it.
// Before answering, every open event stream is given a moment to send
// the run's last events, so a client that also follows /event sees them
// before the answer.
func (s *Server) prompt(w http.ResponseWriter, r *http.Request) *apiError {
	adm, e := s.admit(r)
	if e != nil {
		return e
	}
	return s.answerRun(w, r, adm)
}

// answerRun answers a blocking prompt once its run has ended (see prompt).
func (s *Server) answerRun(w http.ResponseWriter, r *http.Request, adm engine.Admission) *apiError {
	id := r.PathValue("id")
	if adm.RunID == "" {
		m, err := s.st.Message(r.Context(), id, adm.MessageID)
		if err != nil {
			return s.storeErr(err, "message")
		}
		writeJSON(w, http.StatusOK, m)
		return nil
	}
	run, err := s.eng.WaitRun(r.Context(), adm.RunID)
	if err != nil {
		if r.Context().Err() != nil && !adm.Steered && !adm.Duplicate {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
			defer cancel()
			if err := s.eng.AbortRun(ctx, id, adm.RunID); err != nil {
				s.log.Warn("abort run of a prompt whose client went away", "run", adm.RunID, "err", err)
			}
		}
		return s.storeErr(err, "run "+adm.RunID)
	}
	head, _ := s.hub.Head()
	if s.hub.WaitDelivered(r.Context(), head, deliveryGrace) {
		// A client that follows the stream and exits once its prompt is
		// answered (opencode run --attach) reads the answer and the
		// stream on two connections: the events were sent first, and get
		// a moment to be read first.
		t := time.NewTimer(streamSettle)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
		}
	}
	failed := run.State == core.RunFailed && run.Error != nil
	if failed && errorsAsStatus(r) {
		writeRunError(w, run.Error)
		return nil
	}
	m, err := s.lastAssistant(r.Context(), id, adm.RunID)
	if errors.Is(err, store.ErrNotFound) && failed {
		// No message carries the error (the run failed before its first
		// step): the status says it.
		writeRunError(w, run.Error)
		return nil
	}
	if err != nil {
		return s.storeErr(err, "message")
	}
	if failed && m.Info.Error == nil {
		m.Info.Error = run.Error
	}
	writeJSON(w, http.StatusOK, m)
	return nil
}

// errorsAsStatus reports whether the client asked for a failed run to be
// answered with an error status (X-Agentd-Errors: status, or
// ?errors=status) rather than, as opencode answers, 200 with the error in
// the message.
func errorsAsStatus(r *http.Request) bool {
	return r.Header.Get("X-Agentd-Errors") == "status" || r.URL.Query().Get("errors") == "status"
}

// writeRunError answers a failed run with its error: 502 for a
// provider's, 500 otherwise.
func writeRunError(w http.ResponseWriter, e *core.Error) {
	status := http.StatusInternalServerError
	if e.Name == core.ErrNameAPI || e.Name == core.ErrNameProviderAuth {
		status = http.StatusBadGateway
	}
	writeJSON(w, status, e)
}

// deliveryGrace bounds how long a blocking prompt waits for event streams
// to send the run's last events; a slow stream does not hold it longer.
// streamSettle is the moment they then get to be read.
const (
	deliveryGrace = 250 * time.Millisecond
	streamSettle  = 30 * time.Millisecond
)

// lastAssistant returns the run's last assistant message with its parts.
func (s *Server) lastAssistant(ctx context.Context, sessionID, runID string) (core.MessageWithParts, error) {
	m, err := s.st.LastRunMessage(ctx, runID, core.RoleAssistant)
	if errors.Is(err, store.ErrNotFound) {
		return m, fmt.Errorf("run %s has no assistant message: %w", runID, store.ErrNotFound)
	}
	if err == nil && m.Info.SessionID != sessionID {
		return core.MessageWithParts{}, fmt.Errorf("run %s is not session %s's: %w", runID, sessionID, store.ErrNotFound)
	}
	return m, err
}

func (s *Server) listCommands(w http.ResponseWriter, r *http.Request) *apiError {
	dir, e := s.directory(r)
	if e != nil {
		return e
	}
	writeList(w, r, s.cfg.Commands.For(dir).List(), false, nil)
	return nil
}

// commandBody is the request of POST /session/{id}/command.
type commandBody struct {
	MessageID string `json:"messageID"`
	Agent     string `json:"agent"`
	Model     string `json:"model"`
	Arguments string `json:"arguments"`
	Command   string `json:"command" doc:"required"`
	Variant   string `json:"variant"`
	// Parts are files sent along with the command.
	Parts []engine.InputPart `json:"parts"`
}

// runCommand runs a custom command: its template, filled with the
// arguments, as a prompt to the command's agent and model (the request's
// win), answered like a blocking prompt. A subtask command runs in the
// session itself: agentd has no subagents yet.
func (s *Server) runCommand(w http.ResponseWriter, r *http.Request) *apiError {
	var in commandBody
	if e := decodeJSON(r, &in, false); e != nil {
		return e
	}
	adm, e := s.command(r, in.Command, in.Arguments, in.MessageID, in.Agent, in.Model, in.Variant, in.Parts)
	if e != nil {
		return e
	}
	return s.answerRun(w, r, adm)
}

// command admits a command of the session's directory as a prompt: its
// template filled with the arguments, the files sent along, its agent and
// model unless the request names others.
func (s *Server) command(r *http.Request, name, args, messageID, agent, model, variant string, files []engine.InputPart) (engine.Admission, *apiError) {
	id := r.PathValue("id")
	sess, err := s.st.Session(r.Context(), id)
	if err != nil {
		return engine.Admission{}, s.storeErr(err, "session "+id)
	}
	c, ok := s.cfg.Commands.For(sess.Directory)[strings.TrimPrefix(name, "/")]
	if !ok {
		return engine.Admission{}, notFound("command %q not found (GET /command lists them)", name)
	}
	pi := engine.PromptInput{MessageID: messageID, Agent: c.Agent, Variant: variant,
		Parts: append([]engine.InputPart{{Type: core.PartText, Text: command.Expand(c.Template, args)}}, files...)}
	if agent != "" {
		pi.Agent = agent
	}
	if model == "" {
		model = c.Model
	}
	if model != "" {
		ref, err := config.ParseModel(model)
		if err != nil {
			return engine.Admission{}, badRequest("model %q: %v", model, err)
		}
		pi.Model = &ref
	}
	adm, err := s.eng.Prompt(r.Context(), id, pi)
	if err != nil {
		return adm, s.storeErr(err, "session "+id)
	}
	return adm, nil
}

// initBody is the request of POST /session/{id}/init.
type initBody struct {
	ModelID    string `json:"modelID"`
	ProviderID string `json:"providerID"`
	MessageID  string `json:"messageID"`
}

// initProject runs the init command (opencode's session.init) and answers
// true once its run has ended.
func (s *Server) initProject(w http.ResponseWriter, r *http.Request) *apiError {
	var in initBody
	if e := decodeJSON(r, &in, true); e != nil {
		return e
	}
	model := ""
	if in.ProviderID != "" && in.ModelID != "" {
		model = in.ProviderID + "/" + in.ModelID
	}
	adm, e := s.command(r, "init", "", in.MessageID, "", model, "", nil)
	if e != nil {
		return e
	}
	if _, err := s.eng.WaitRun(r.Context(), adm.RunID); err != nil {
		return s.storeErr(err, "run")
	}
	writeJSON(w, http.StatusOK, true)
	return nil
}

// disposeInstance drops what is cached for the request's directory.
func (s *Server) disposeInstance(w http.ResponseWriter, r *http.Request) *apiError {
	dir, e := s.directory(r)
	if e != nil {
		return e
	}
	s.cfg.Commands.Forget(dir)
	s.hub.PublishLive(core.MustEvent("", "server.instance.disposed", map[string]string{"directory": dir}))
	writeJSON(w, http.StatusOK, true)
	return nil
}

func (s *Server) promptAsync(w http.ResponseWriter, r *http.Request) *apiError {
	if _, e := s.admit(r); e != nil {
		return e
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// summarizeBody is the request of POST /session/{id}/summarize.
type summarizeBody struct {
	ProviderID string `json:"providerID"`
	ModelID    string `json:"modelID"`
}

// summarize compacts the session (opencode's summarize): a run of its own
// that writes a summary later prompts start from. It answers true once
// the compaction has ended, like opencode.
func (s *Server) summarize(w http.ResponseWriter, r *http.Request) *apiError {
	var in summarizeBody
	if e := decodeJSON(r, &in, true); e != nil {
		return e
	}
	pi := engine.PromptInput{Compact: true}
	if in.ProviderID != "" || in.ModelID != "" {
		pi.Model = &core.ModelRef{ProviderID: in.ProviderID, ModelID: in.ModelID}
	}
	adm, err := s.eng.Prompt(r.Context(), r.PathValue("id"), pi)
	if err != nil {
		return s.storeErr(err, "session "+r.PathValue("id"))
	}
	run, err := s.eng.WaitRun(r.Context(), adm.RunID)
	if err != nil {
		return s.storeErr(err, "run "+adm.RunID)
	}
	if run.State == core.RunFailed && run.Error != nil {
		writeJSON(w, http.StatusInternalServerError, run.Error)
		return nil
	}
	writeJSON(w, http.StatusOK, run.State == core.RunSucceeded)
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

func (s *Server) stream(w http.ResponseWriter, r *http.Request, sessionID string, wrap func(core.Event) any) *apiError {
	after, ok, err := events.ParseCursor(r)
	if err != nil {
		return badRequest("%v", err)
	}
	if sessionID != "" {
		if _, err := s.st.Session(r.Context(), sessionID); err != nil {
			return s.storeErr(err, "session "+sessionID)
		}
	}
	err = s.hub.Stream(r.Context(), w, s.st.EventBounds, events.StreamOptions{
		After: after, HasCursor: ok, SessionID: sessionID, Heartbeat: s.cfg.Heartbeat, Wrap: wrap,
	})
	if err != nil && r.Context().Err() == nil {
		s.log.Debug("event stream ended", "err", err)
	}
	return nil
}

func (s *Server) eventStream(w http.ResponseWriter, r *http.Request) *apiError {
	return s.stream(w, r, "", nil)
}

func (s *Server) sessionEventStream(w http.ResponseWriter, r *http.Request) *apiError {
	return s.stream(w, r, r.PathValue("id"), nil)
}

// globalEventStream wraps each event with the directory of its session,
// which opencode's clients use to route it.
func (s *Server) globalEventStream(w http.ResponseWriter, r *http.Request) *apiError {
	ctx := r.Context()
	return s.stream(w, r, "", func(ev core.Event) any {
		return map[string]any{"directory": s.sessionDir(ctx, ev.SessionID), "payload": ev}
	})
}
