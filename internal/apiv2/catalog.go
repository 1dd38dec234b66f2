package apiv2

import (
	"errors"
	"io/fs"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/agentd/agentd/internal/server"
	"github.com/agentd/agentd/internal/workspace"
)

// The routes that describe the server and a directory: health, location,
// agents, models, providers, commands, skills, references.

type healthJSON struct {
	Healthy bool `json:"healthy"`
}

func (a *API) health(w http.ResponseWriter, r *http.Request) *apiError {
	if a.cfg.Unhealthy != nil {
		if err := a.cfg.Unhealthy(); err != nil {
			return unavailable("the node cannot keep what it is given: " + err.Error())
		}
	}
	writeJSON(w, http.StatusOK, healthJSON{Healthy: true})
	return nil
}

// reqDir is the directory a request names: location[directory], else
// ?directory= or the x-opencode-directory header (opencode's clients send
// both), else the server's; checked and resolved as the file routes do.
func (a *API) reqDir(r *http.Request) (string, *apiError) {
	q := r.URL.Query()
	dir := q.Get("location[directory]")
	if dir == "" {
		dir = q.Get("directory")
	}
	if dir == "" {
		dir = r.Header.Get("x-opencode-directory")
		if u, err := url.PathUnescape(dir); err == nil && !filepath.IsAbs(dir) {
			dir = u
		}
	}
	real, err := a.cfg.Files.Dir(dir)
	if err != nil {
		return "", fileErr(err, dir)
	}
	return real, nil
}

// fileErr maps an error of the file access.
func fileErr(err error, p string) *apiError {
	if msg, ok := server.IsBadRequest(err); ok {
		return invalid("%s", msg)
	}
	switch {
	case errors.Is(err, workspace.ErrDenied):
		return tagged(http.StatusForbidden, "ForbiddenError", "reading "+p+" is denied by the operator's rules")
	case errors.Is(err, workspace.ErrOutside):
		return tagged(http.StatusForbidden, "ForbiddenError", "path "+p+" is outside the directory")
	case errors.Is(err, workspace.ErrTooLarge):
		return invalid("%v", err)
	case errors.Is(err, fs.ErrNotExist):
		return tagged(http.StatusNotFound, "NotFoundError", p+" does not exist")
	}
	return invalid("%s: %v", p, err)
}

// located answers {location, data} for the request's directory.
func (a *API) located(w http.ResponseWriter, r *http.Request, list func(dir string) any) *apiError {
	dir, e := a.reqDir(r)
	if e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, map[string]any{"location": location(dir), "data": list(dir)})
	return nil
}

func (a *API) getLocation(w http.ResponseWriter, r *http.Request) *apiError {
	dir, e := a.reqDir(r)
	if e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, location(dir))
	return nil
}

// agentJSON is opencode 2's AgentV2.Info.
type agentJSON struct {
	ID          string      `json:"id"`
	Model       *modelRef   `json:"model,omitempty"`
	Request     requestJSON `json:"request"`
	System      string      `json:"system,omitempty"`
	Description string      `json:"description,omitempty"`
	Mode        string      `json:"mode"`
	Hidden      bool        `json:"hidden"`
	Steps       int         `json:"steps,omitempty"`
	Permissions []ruleJSON  `json:"permissions"`
}

// requestJSON is what opencode adds to a provider's requests; agentd's
// public answers add nothing.
type requestJSON struct {
	Headers map[string]string `json:"headers"`
	Body    map[string]any    `json:"body"`
}

func emptyRequest() requestJSON {
	return requestJSON{Headers: map[string]string{}, Body: map[string]any{}}
}

// ruleJSON is opencode 2's PermissionV2.Rule.
type ruleJSON struct {
	Action   string `json:"action"`
	Resource string `json:"resource"`
	Effect   string `json:"effect"`
}

func (a *API) listAgents(w http.ResponseWriter, r *http.Request) *apiError {
	return a.located(w, r, func(string) any {
		out := []agentJSON{}
		for _, ag := range a.cfg.Catalog.Agents {
			j := agentJSON{ID: ag.Name, Request: emptyRequest(), System: ag.Prompt, Description: ag.Description, Mode: ag.Mode,
				Hidden: ag.Hidden, Steps: ag.Steps, Permissions: []ruleJSON{}}
			if j.Mode == "" {
				j.Mode = "all"
			}
			if ag.Model != nil {
				m := refOf(*ag.Model)
				j.Model = &m
			}
			for _, rule := range ag.Permission {
				j.Permissions = append(j.Permissions, ruleJSON{Action: rule.Permission, Resource: rule.Pattern, Effect: rule.Action})
			}
			out = append(out, j)
		}
		return out
	})
}

// modelJSON is opencode 2's ModelV2.Info, with what agentd knows of a
// model.
type modelJSON struct {
	ID           string       `json:"id"`
	ProviderID   string       `json:"providerID"`
	Name         string       `json:"name"`
	API          modelAPI     `json:"api"`
	Capabilities capabilities `json:"capabilities"`
	Request      requestJSON  `json:"request"`
	Variants     []struct{}   `json:"variants"`
	Time         released     `json:"time"`
	Cost         []costJSON   `json:"cost"`
	Status       string       `json:"status"`
	Enabled      bool         `json:"enabled"`
	Limit        limitJSON    `json:"limit"`
}

type modelAPI struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Package string `json:"package"`
	URL     string `json:"url,omitempty"`
}

type capabilities struct {
	Tools  bool     `json:"tools"`
	Input  []string `json:"input"`
	Output []string `json:"output"`
}

type released struct {
	Released int64 `json:"released"`
}

type costJSON struct {
	Input  float64   `json:"input"`
	Output float64   `json:"output"`
	Cache  cacheCost `json:"cache"`
}

type cacheCost struct {
	Read  float64 `json:"read"`
	Write float64 `json:"write"`
}

type limitJSON struct {
	Context int `json:"context"`
	Output  int `json:"output"`
}

func modelsOf(p server.Provider) []modelJSON {
	out := []modelJSON{}
	for _, m := range p.Models {
		out = append(out, modelJSON{ID: m.ID, ProviderID: p.ID, Name: m.Name,
			API:          modelAPI{ID: m.ID, Type: "aisdk", Package: p.NPM, URL: p.BaseURL},
			Capabilities: capabilities{Tools: true, Input: []string{"text"}, Output: []string{"text"}},
			Request:      emptyRequest(), Variants: []struct{}{}, Time: released{},
			Cost: []costJSON{{Input: m.Cost.Input, Output: m.Cost.Output,
				Cache: cacheCost{Read: m.Cost.CacheRead, Write: m.Cost.CacheWrite}}},
			Status: "active", Enabled: true, Limit: limitJSON{Context: m.Context, Output: m.Output}})
	}
	return out
}

// providers is the providers' list as it is now.
func (a *API) providers() []server.Provider {
	if a.cfg.LiveProviders != nil {
		return a.cfg.LiveProviders()
	}
	return a.cfg.Catalog.Providers
}

func (a *API) listModels(w http.ResponseWriter, r *http.Request) *apiError {
	return a.located(w, r, func(string) any {
		out := []modelJSON{}
		for _, p := range a.providers() {
			out = append(out, modelsOf(p)...)
		}
		return out
	})
}

// providerJSON is opencode 2's ProviderV2.Info.
type providerJSON struct {
	ID      string      `json:"id"`
	Name    string      `json:"name"`
	API     providerAPI `json:"api"`
	Request requestJSON `json:"request"`
}

type providerAPI struct {
	Type     string `json:"type"`
	Package  string `json:"package,omitempty"`
	URL      string `json:"url,omitempty"`
	Settings any    `json:"settings,omitempty"`
}

func providerOf(p server.Provider) providerJSON {
	api := providerAPI{Type: "aisdk", Package: p.NPM, URL: p.BaseURL}
	if p.NPM == "" {
		// agentd's built-in model: no AI SDK package behind it.
		api = providerAPI{Type: "native", URL: p.BaseURL, Settings: map[string]any{}}
	}
	name := p.Name
	if name == "" {
		name = p.ID
	}
	return providerJSON{ID: p.ID, Name: name, API: api, Request: emptyRequest()}
}

func (a *API) listProviders(w http.ResponseWriter, r *http.Request) *apiError {
	return a.located(w, r, func(string) any {
		out := []providerJSON{}
		for _, p := range a.providers() {
			out = append(out, providerOf(p))
		}
		return out
	})
}

func (a *API) getProvider(w http.ResponseWriter, r *http.Request) *apiError {
	id := r.PathValue("providerID")
	for _, p := range a.providers() {
		if p.ID == id {
			return a.located(w, r, func(string) any { return providerOf(p) })
		}
	}
	return tagged(http.StatusNotFound, "ProviderNotFoundError", "Provider not found: "+id, "providerID", id)
}

// commandJSON is opencode 2's CommandV2.Info.
type commandJSON struct {
	Name        string    `json:"name"`
	Template    string    `json:"template"`
	Description string    `json:"description,omitempty"`
	Agent       string    `json:"agent,omitempty"`
	Model       *modelRef `json:"model,omitempty"`
	Subtask     bool      `json:"subtask,omitempty"`
}

func (a *API) listCommands(w http.ResponseWriter, r *http.Request) *apiError {
	return a.located(w, r, func(dir string) any {
		out := []commandJSON{}
		for _, c := range a.cfg.Commands.For(dir).List() {
			j := commandJSON{Name: c.Name, Template: c.Template, Description: c.Description, Agent: c.Agent, Subtask: c.Subtask}
			if p, m, ok := strings.Cut(c.Model, "/"); ok && p != "" && m != "" {
				j.Model = &modelRef{ID: m, ProviderID: p}
			}
			out = append(out, j)
		}
		return out
	})
}

// skillJSON is opencode 2's SkillV2Info: agentd offers every skill as a
// command too (slash).
type skillJSON struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Slash       bool   `json:"slash"`
	Location    string `json:"location"`
	Content     string `json:"content"`
}

// listSkills answers the directory's skills, as GET /skill does.
func (a *API) listSkills(w http.ResponseWriter, r *http.Request) *apiError {
	return a.located(w, r, func(dir string) any {
		out := []skillJSON{}
		if a.cfg.Skills == nil {
			return out
		}
		for _, s := range a.cfg.Skills.For(dir) {
			out = append(out, skillJSON{Name: s.Name, Description: s.Description, Slash: true, Location: s.Location, Content: s.Content})
		}
		return out
	})
}

// listReferences answers no references: agentd has no named project
// references.
func (a *API) listReferences(w http.ResponseWriter, r *http.Request) *apiError {
	return a.located(w, r, func(string) any { return []struct{}{} })
}
