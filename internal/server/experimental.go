package server

import (
	"encoding/json"
	"math"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentd/agentd/internal/access"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/tool"
)

// opencode's experimental session list (every project's sessions) and its
// tool lists, served from the store and the tool registry.

// projectSummaryJSON is the project of a session in the global list.
type projectSummaryJSON struct {
	ID       string `json:"id"`
	Name     string `json:"name,omitempty"`
	Worktree string `json:"worktree"`
}

// globalSessionJSON is a session with its project.
type globalSessionJSON struct {
	core.Session
	Project *projectSummaryJSON `json:"project"`
}

// experimentalSessions lists the sessions of every directory, most
// recently updated first, with opencode's filters: roots, start (updated
// at or after), search (in the title), directory, limit (default 100) and
// cursor (updated before it; the X-Next-Cursor header of a full page
// gives it). agentd archives no session: archived changes nothing.
func (s *Server) experimentalSessions(w http.ResponseWriter, r *http.Request) *apiError {
	qv := r.URL.Query()
	limit, e := queryInt(r, "limit", 100, 1, maxPage)
	if e != nil {
		return e
	}
	start, e := queryInt(r, "start", 0, 0, math.MaxInt)
	if e != nil {
		return e
	}
	cursor, e := queryInt(r, "cursor", 0, 0, math.MaxInt)
	if e != nil {
		return e
	}
	q := store.SessionQuery{Owner: access.ListOwner(r.Context())}
	if qv.Get("directory") != "" || r.Header.Get("x-opencode-directory") != "" {
		if q.Directory, e = s.directory(r); e != nil {
			return e
		}
	}
	list, err := s.st.Sessions(r.Context(), q)
	if err != nil {
		return s.storeErr(err, "sessions")
	}
	roots, search := qv.Get("roots") == "true", strings.ToLower(qv.Get("search"))
	projects := map[string]*projectSummaryJSON{}
	out := []globalSessionJSON{}
	more := false
	for _, sess := range list {
		switch {
		case roots && sess.ParentID != "":
		case sess.Time.Updated < int64(start):
		case cursor > 0 && sess.Time.Updated >= int64(cursor):
		case search != "" && !strings.Contains(strings.ToLower(sess.Title), search):
		case len(out) == limit:
			more = true
		default:
			out = append(out, globalSessionJSON{Session: sess, Project: projectOf(projects, sess)})
		}
		if more {
			break
		}
	}
	if more {
		w.Header().Set("X-Next-Cursor", strconv.FormatInt(out[len(out)-1].Time.Updated, 10))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// projectOf returns the project of a session's directory, computed once
// per directory.
func projectOf(seen map[string]*projectSummaryJSON, sess core.Session) *projectSummaryJSON {
	if p, ok := seen[sess.Directory]; ok {
		return p
	}
	root := worktree(sess.Directory)
	p := &projectSummaryJSON{ID: sess.ProjectID, Worktree: root}
	if p.ID == "" {
		p.ID = "global"
	}
	if root != "/" {
		p.Name = filepath.Base(root)
	}
	seen[sess.Directory] = p
	return p
}

// toolJSON is one tool of GET /experimental/tool.
type toolJSON struct {
	ID          string          `json:"id"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// tools returns the tools the node offers agents, by name: the built-in
// ones, the engine's own (task, question), those of the connected MCP
// servers.
func (s *Server) tools() []tool.Tool { return s.eng.Tools() }

// toolIDs answers the names of the tools a model may be offered.
func (s *Server) toolIDs(w http.ResponseWriter, r *http.Request) *apiError {
	ids := []string{}
	for _, t := range s.tools() {
		ids = append(ids, t.Name())
	}
	writeJSON(w, http.StatusOK, ids)
	return nil
}

// toolList answers the tools with their descriptions and input schemas.
// agentd offers every model the same tools (an agent's rules may deny
// some): provider and model change nothing.
func (s *Server) toolList(w http.ResponseWriter, r *http.Request) *apiError {
	out := []toolJSON{}
	for _, t := range s.tools() {
		schema := t.Schema()
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		out = append(out, toolJSON{ID: t.Name(), Description: t.Description(), Parameters: schema})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
