package apiv2

import (
	"net/http"
	"os"
	"sort"

	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/llm/scripted"
)

// Integrations: the providers a key connects, and the keys stored for
// them (the credential store, which v1's PUT /auth/{id} writes too). A
// stored key is used by a provider configured without one. OAuth logins
// are refused: they need a browser on the server's machine.

// integrationJSON is opencode 2's Integration.Info.
type integrationJSON struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Methods     []any  `json:"methods"`
	Connections []any  `json:"connections"`
}

type keyMethod struct {
	Type  string `json:"type"`
	Label string `json:"label,omitempty"`
}

type envMethod struct {
	Type  string   `json:"type"`
	Names []string `json:"names"`
}

type credentialConn struct {
	Type  string `json:"type"`
	ID    string `json:"id"`
	Label string `json:"label"`
}

type envConn struct {
	Type string `json:"type"`
	Name string `json:"name"`
}

// integrations are the configured providers and the stock ones an
// environment key or a stored key enables, by id.
func (a *API) integrations() map[string]integrationJSON {
	out := map[string]integrationJSON{}
	add := func(id, name string, env []string) {
		in, ok := out[id]
		if !ok {
			in = integrationJSON{ID: id, Name: name}
		}
		for _, e := range env {
			in.Methods = append(in.Methods, envMethod{Type: "env", Names: []string{e}})
			if os.Getenv(e) != "" {
				in.Connections = append(in.Connections, envConn{Type: "env", Name: e})
			}
		}
		out[id] = in
	}
	for _, p := range a.cfg.Catalog.Providers {
		if p.ID != scripted.ProviderID {
			add(p.ID, p.Name, nil)
		}
	}
	for _, k := range config.Kinds {
		if k.Stock != "" {
			add(k.Stock, k.Name, []string{k.KeyEnv})
		}
	}
	for id, in := range out {
		in.Methods = append([]any{keyMethod{Type: "key", Label: "API key"}}, in.Methods...)
		if a.cfg.Credentials != nil {
			if key, label := a.cfg.Credentials.Key(id); key != "" {
				in.Connections = append([]any{credentialConn{Type: "credential", ID: id, Label: label}}, in.Connections...)
			}
		}
		if in.Connections == nil {
			in.Connections = []any{}
		}
		out[id] = in
	}
	return out
}

func (a *API) listIntegrations(w http.ResponseWriter, r *http.Request) *apiError {
	return a.located(w, r, func(string) any {
		all := a.integrations()
		out := make([]integrationJSON, 0, len(all))
		for _, in := range all {
			out = append(out, in)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
		return out
	})
}

func (a *API) getIntegration(w http.ResponseWriter, r *http.Request) *apiError {
	id := r.PathValue("integrationID")
	in, ok := a.integrations()[id]
	if !ok {
		return tagged(http.StatusNotFound, "NotFoundError", "Integration not found: "+id)
	}
	return a.located(w, r, func(string) any { return in })
}

type keyBody struct {
	Key   string `json:"key" doc:"required"`
	Label string `json:"label"`
}

// connectKey stores a provider's API key.
func (a *API) connectKey(w http.ResponseWriter, r *http.Request) *apiError {
	id := r.PathValue("integrationID")
	var in keyBody
	if e := decode(r, &in, false); e != nil {
		return e
	}
	if in.Key == "" {
		return invalid("key: required")
	}
	if _, ok := a.integrations()[id]; !ok {
		return invalid("no provider %q: configure it (provider.%s in the configuration) before connecting a key", id, id)
	}
	if a.cfg.Credentials == nil {
		return unsupported("this server keeps no credentials: configure the key (provider." + id + ".options.apiKey)")
	}
	label := in.Label
	if label == "" {
		label = "API key"
	}
	if err := a.cfg.Credentials.Set(id, in.Key, label); err != nil {
		a.log.Error("store credential", "provider", id, "err", err)
		return tagged(http.StatusInternalServerError, "UnknownError", "the key could not be stored")
	}
	noContent(w)
	return nil
}

// oauthRefused answers the OAuth routes: an OAuth login needs a browser
// on the server's machine, which a headless server does not have.
func (a *API) oauthRefused(w http.ResponseWriter, r *http.Request) *apiError {
	return unsupported("OAuth logins are not available on this server: they need a browser on the server's machine; " +
		"connect the provider with an API key (POST /api/integration/{id}/connect/key, or PUT /auth/{id}) or in the configuration")
}

type labelBody struct {
	Label string `json:"label" doc:"required"`
}

// updateCredential renames a stored key; a credential's id is its
// provider's.
func (a *API) updateCredential(w http.ResponseWriter, r *http.Request) *apiError {
	id := r.PathValue("credentialID")
	var in labelBody
	if e := decode(r, &in, false); e != nil {
		return e
	}
	if in.Label == "" {
		return invalid("label: required")
	}
	if a.cfg.Credentials == nil {
		return credentialNotFound(id)
	}
	ok, err := a.cfg.Credentials.Label(id, in.Label)
	if err != nil {
		a.log.Error("store credential", "provider", id, "err", err)
		return tagged(http.StatusInternalServerError, "UnknownError", "the credential could not be stored")
	}
	if !ok {
		return credentialNotFound(id)
	}
	noContent(w)
	return nil
}

func credentialNotFound(id string) *apiError {
	return tagged(http.StatusNotFound, "NotFoundError", "Credential not found: "+id)
}

// removeCredential forgets a stored key (nothing to forget is no error).
func (a *API) removeCredential(w http.ResponseWriter, r *http.Request) *apiError {
	id := r.PathValue("credentialID")
	if a.cfg.Credentials != nil {
		if _, err := a.cfg.Credentials.Remove(id); err != nil {
			a.log.Error("remove credential", "provider", id, "err", err)
			return tagged(http.StatusInternalServerError, "UnknownError", "the credential could not be removed")
		}
	}
	noContent(w)
	return nil
}
