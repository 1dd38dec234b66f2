package server

import (
	"context"
	"net/http"
	"path/filepath"
	"sort"
	"sync"

	"github.com/agentd/agentd/internal/access"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/mcp"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/vcs"
)

// Catalog is what the server tells opencode's clients about itself: the
// models it can use, its agents and its configuration. The discovery
// routes (/config, /provider, /agent …) answer from it.
type Catalog struct {
	Providers []Provider
	// Default is the model a prompt without one uses.
	Default core.ModelRef
	Agents  []Agent
	// Config is the configuration in opencode's shape, without secrets.
	Config map[string]any
}

// Provider is a model provider agentd is configured with.
type Provider struct {
	ID   string
	Name string
	// Source is how it was configured: "config", "env" or "custom"
	// (agentd's built-in scripted model).
	Source  string
	Env     []string
	NPM     string
	BaseURL string
	Models  []Model
}

// Model is one model of a provider, with what agentd knows of it.
type Model struct {
	ID   string
	Name string
	// Context and Output are the token limits; 0 when unknown.
	Context, Output int
	// Cost is in dollars per million tokens.
	Cost ModelCost
	// Image and PDF say whether the model takes pictures and PDFs.
	Image, PDF bool
}

// ModelCost is a model's price per million tokens.
type ModelCost struct {
	Input, Output, CacheRead, CacheWrite float64
}

// Agent is an agent a prompt may name.
type Agent struct {
	Name        string
	Description string
	// Mode is primary, subagent or all.
	Mode       string
	Native     bool
	Hidden     bool
	Permission []core.Rule
	Prompt     string
	Model      *core.ModelRef
	Steps      int
}

// Paths are the directories GET /path reports.
type Paths struct {
	Home   string
	State  string
	Config string
}

type modelJSON struct {
	ID           string            `json:"id"`
	ProviderID   string            `json:"providerID"`
	API          modelAPI          `json:"api"`
	Name         string            `json:"name"`
	Family       string            `json:"family"`
	Capabilities modelCapabilities `json:"capabilities"`
	Cost         modelCostJSON     `json:"cost"`
	Limit        modelLimit        `json:"limit"`
	Status       string            `json:"status"`
	Options      map[string]any    `json:"options"`
	Headers      map[string]string `json:"headers"`
	ReleaseDate  string            `json:"release_date"`
	Variants     map[string]any    `json:"variants"`
}

type modelAPI struct {
	ID  string `json:"id"`
	URL string `json:"url"`
	NPM string `json:"npm"`
}

type modalities struct {
	Text  bool `json:"text"`
	Audio bool `json:"audio"`
	Image bool `json:"image"`
	Video bool `json:"video"`
	PDF   bool `json:"pdf"`
}

type modelCapabilities struct {
	Temperature bool       `json:"temperature"`
	Reasoning   bool       `json:"reasoning"`
	Attachment  bool       `json:"attachment"`
	Toolcall    bool       `json:"toolcall"`
	Input       modalities `json:"input"`
	Output      modalities `json:"output"`
	Interleaved bool       `json:"interleaved"`
}

type modelCostJSON struct {
	Input  float64   `json:"input"`
	Output float64   `json:"output"`
	Cache  cacheCost `json:"cache"`
}

type cacheCost struct {
	Read  float64 `json:"read"`
	Write float64 `json:"write"`
}

type modelLimit struct {
	Context int `json:"context"`
	Output  int `json:"output"`
}

type providerJSON struct {
	ID      string               `json:"id"`
	Name    string               `json:"name"`
	Source  string               `json:"source"`
	Env     []string             `json:"env"`
	Options map[string]any       `json:"options"`
	Models  map[string]modelJSON `json:"models"`
}

func (p Provider) json() providerJSON {
	out := providerJSON{ID: p.ID, Name: p.Name, Source: p.Source, Env: p.Env, Options: map[string]any{}, Models: map[string]modelJSON{}}
	if out.Env == nil {
		out.Env = []string{}
	}
	if p.BaseURL != "" {
		out.Options["baseURL"] = p.BaseURL
	}
	for _, m := range p.Models {
		out.Models[m.ID] = modelJSON{
			ID: m.ID, ProviderID: p.ID, API: modelAPI{ID: m.ID, URL: p.BaseURL, NPM: p.NPM}, Name: m.Name,
			Capabilities: modelCapabilities{Temperature: true, Toolcall: true, Attachment: m.Image || m.PDF,
				Input: modalities{Text: true, Image: m.Image, PDF: m.PDF}, Output: modalities{Text: true}},
			Cost: modelCostJSON{Input: m.Cost.Input, Output: m.Cost.Output,
				Cache: cacheCost{Read: m.Cost.CacheRead, Write: m.Cost.CacheWrite}},
			Limit:  modelLimit{Context: m.Context, Output: m.Output},
			Status: "active", Options: map[string]any{}, Headers: map[string]string{}, Variants: map[string]any{},
		}
	}
	return out
}

// defaults maps each provider to the model clients should pick for it:
// the configured default model for its provider, the first model for the
// others.
func (c Catalog) defaults() map[string]string {
	out := map[string]string{}
	for _, p := range c.Providers {
		if len(p.Models) == 0 {
			continue
		}
		ids := make([]string, len(p.Models))
		for i, m := range p.Models {
			ids[i] = m.ID
		}
		sort.Strings(ids)
		out[p.ID] = ids[0]
		if p.ID == c.Default.ProviderID {
			out[p.ID] = c.Default.ModelID
		}
	}
	return out
}

func (c Catalog) providersJSON() []providerJSON {
	out := make([]providerJSON, 0, len(c.Providers))
	for _, p := range c.Providers {
		out = append(out, p.json())
	}
	return out
}

func (s *Server) getConfig(w http.ResponseWriter, r *http.Request) *apiError {
	cfg := s.cfg.Catalog.Config
	if cfg == nil {
		cfg = map[string]any{}
	}
	writeJSON(w, http.StatusOK, cfg)
	return nil
}

// catalog is the Catalog with the providers as they are now.
func (s *Server) catalog() Catalog {
	c := s.cfg.Catalog
	if s.cfg.LiveProviders != nil {
		c.Providers = s.cfg.LiveProviders()
	}
	return c
}

// Providers is the providers' list as it is now (LiveProviders, else the
// Catalog's), for another API mounted beside this one.
func (s *Server) Providers() []Provider { return s.catalog().Providers }

func (s *Server) configProviders(w http.ResponseWriter, r *http.Request) *apiError {
	c := s.catalog()
	writeJSON(w, http.StatusOK, configProvidersJSON{Providers: c.providersJSON(), Default: c.defaults()})
	return nil
}

func (s *Server) listProviders(w http.ResponseWriter, r *http.Request) *apiError {
	c := s.catalog()
	connected := []string{}
	for _, p := range c.Providers {
		connected = append(connected, p.ID)
	}
	writeJSON(w, http.StatusOK, providerListJSON{All: c.providersJSON(), Default: c.defaults(), Connected: connected})
	return nil
}

type agentJSON struct {
	Name        string      `json:"name"`
	Description string      `json:"description,omitempty"`
	Mode        string      `json:"mode"`
	Native      bool        `json:"native"`
	Hidden      bool        `json:"hidden,omitempty"`
	Permission  []core.Rule `json:"permission"`
	Model       *agentModel `json:"model,omitempty"`
	Prompt      string      `json:"prompt,omitempty"`
	Options     struct{}    `json:"options"`
	Steps       int         `json:"steps,omitempty"`
}

type agentModel struct {
	ModelID    string `json:"modelID"`
	ProviderID string `json:"providerID"`
}

func (s *Server) listAgents(w http.ResponseWriter, r *http.Request) *apiError {
	out := make([]agentJSON, 0, len(s.cfg.Catalog.Agents))
	for _, a := range s.cfg.Catalog.Agents {
		j := agentJSON{Name: a.Name, Description: a.Description, Mode: a.Mode, Native: a.Native, Hidden: a.Hidden,
			Permission: a.Permission, Prompt: a.Prompt, Steps: a.Steps}
		if j.Permission == nil {
			j.Permission = []core.Rule{}
		}
		if a.Model != nil {
			j.Model = &agentModel{ModelID: a.Model.ModelID, ProviderID: a.Model.ProviderID}
		}
		out = append(out, j)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// worktree returns the root of the git repository holding dir, or "/"
// when dir is in none (opencode's "global" project).
func worktree(dir string) string {
	if root, ok := vcs.Root(dir); ok {
		return root
	}
	return "/"
}

func (s *Server) getPath(w http.ResponseWriter, r *http.Request) *apiError {
	dir, e := s.directory(r)
	if e != nil {
		return e
	}
	p := s.cfg.Paths
	writeJSON(w, http.StatusOK, pathJSON{Home: p.Home, State: p.State, Config: p.Config, Worktree: worktree(dir), Directory: dir})
	return nil
}

func (s *Server) currentProject(w http.ResponseWriter, r *http.Request) *apiError {
	dir, e := s.directory(r)
	if e != nil {
		return e
	}
	root := worktree(dir)
	p := projectJSON{ID: "global", Worktree: root, Sandboxes: s.sandboxes(root),
		Time: projectTime{Created: s.started.UnixMilli(), Updated: s.started.UnixMilli()}}
	if root != "/" {
		p.VCS, p.Name = "git", filepath.Base(root)
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

func (s *Server) getVCS(w http.ResponseWriter, r *http.Request) *apiError {
	dir, e := s.directory(r)
	if e != nil {
		return e
	}
	var out vcsJSON
	if root := worktree(dir); root != "/" {
		out.Branch = vcs.Branch(root)
		out.DefaultBranch, _ = vcs.DefaultBranch(root)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// fixed answers a route where agentd has nothing to report with the
// empty value of its shape.
func fixed(v any) func(w http.ResponseWriter, r *http.Request) *apiError {
	return func(w http.ResponseWriter, r *http.Request) *apiError {
		writeJSON(w, http.StatusOK, v)
		return nil
	}
}

func (s *Server) mcpStatus(w http.ResponseWriter, r *http.Request) *apiError {
	out := map[string]mcp.Status{}
	if s.cfg.MCP != nil {
		out = s.cfg.MCP.Statuses()
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// todos answers the session's todo list as stored (404 for an unknown
// session).
func (s *Server) todos(w http.ResponseWriter, r *http.Request) *apiError {
	todos, err := s.st.Todos(r.Context(), r.PathValue("id"))
	if err != nil {
		return s.storeErr(err, "session "+r.PathValue("id"))
	}
	writeList(w, r, todos, false, nil)
	return nil
}

func (s *Server) listChildren(w http.ResponseWriter, r *http.Request) *apiError {
	return sessionList(s, w, r, "sessions", func(ctx context.Context, id string, limit int) ([]core.Session, error) {
		all, err := s.st.Sessions(ctx, store.SessionQuery{Owner: access.ListOwner(ctx)})
		if err != nil {
			return nil, err
		}
		var out []core.Session
		for _, sess := range all {
			if sess.ParentID == id {
				out = append(out, sess)
			}
		}
		return out, nil
	}, false, nil)
}

// dirCache remembers the directory of sessions, for /global/event, which
// tells each event's directory.
type dirCache struct {
	mu sync.Mutex
	m  map[string]string
}

// dirCacheSize bounds the cache; it is cleared when full.
const dirCacheSize = 4096

func (s *Server) sessionDir(ctx context.Context, id string) string {
	if id == "" {
		return s.cfg.Directory
	}
	c := &s.dirs
	c.mu.Lock()
	d, ok := c.m[id]
	c.mu.Unlock()
	if ok {
		return d
	}
	sess, err := s.st.Session(ctx, id)
	if err != nil {
		return s.cfg.Directory
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= dirCacheSize {
		c.m = make(map[string]string)
	}
	c.m[id] = sess.Directory
	c.mu.Unlock()
	return sess.Directory
}
