package credential

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/agentd/agentd/internal/server"
)

// opencode's v1 routes of the store: PUT /auth/{providerID} (the TUI's
// /connect with an API key, plugins) and DELETE /auth/{providerID},
// mounted on the server (server.Mount) in opencode's v1 shapes.

// authBody is opencode's Auth: an API key ("api", with a plugin's
// metadata), a well-known provider's key and token ("wellknown"), or an
// OAuth login ("oauth": a plugin's auth hook uses and refreshes it).
type authBody struct {
	Type          string            `json:"type" doc:"required"`
	Key           string            `json:"key,omitempty"`
	Token         string            `json:"token,omitempty"`
	Refresh       string            `json:"refresh,omitempty"`
	Access        string            `json:"access,omitempty"`
	Expires       int64             `json:"expires,omitempty"`
	AccountID     string            `json:"accountId,omitempty"`
	EnterpriseURL string            `json:"enterpriseUrl,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
}

// Routes are the v1 /auth routes over the store.
func (s *Store) Routes() []server.Route {
	return []server.Route{
		{Method: "PUT", Pattern: "/auth/{providerID}", Tag: "opencode", Handler: s.put,
			Summary: "Store a provider's API key (the credential store, the cluster's on PostgreSQL); a provider configured without a key uses it.",
			Doc:     server.RouteDoc{Body: authBody{}, Resp: true}},
		{Method: "DELETE", Pattern: "/auth/{providerID}", Tag: "opencode", Handler: s.remove,
			Summary: "Forget a provider's stored key.", Doc: server.RouteDoc{Resp: true}},
	}
}

// badRequest answers opencode's v1 error shape.
func badRequest(w http.ResponseWriter, msg string) {
	writeJSON(w, http.StatusBadRequest, map[string]any{"name": "BadRequest", "data": map[string]string{"message": msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Store) put(w http.ResponseWriter, r *http.Request) {
	var in authBody
	b, err := io.ReadAll(r.Body)
	if err == nil {
		err = json.Unmarshal(b, &in)
	}
	if err != nil {
		badRequest(w, "body: want opencode's Auth object ({\"type\":\"api\",\"key\":\"…\"})")
		return
	}
	e := Entry{Type: in.Type, Key: in.Key, Refresh: in.Refresh, Access: in.Access, Expires: in.Expires,
		AccountID: in.AccountID, EnterpriseURL: in.EnterpriseURL, Metadata: in.Metadata}
	if in.Type != "oauth" {
		e.Label = "API key"
	}
	if err := s.Put(r.PathValue("providerID"), e); err != nil {
		if errors.Is(err, ErrInvalid) {
			badRequest(w, err.Error())
			return
		}
		writeJSON(w, http.StatusInternalServerError, map[string]any{"name": "UnknownError", "data": map[string]string{"message": "the key could not be stored"}})
		return
	}
	writeJSON(w, http.StatusOK, true)
}

func (s *Store) remove(w http.ResponseWriter, r *http.Request) {
	if _, err := s.Remove(r.PathValue("providerID")); err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]any{"name": "UnknownError", "data": map[string]string{"message": "the key could not be removed"}})
		return
	}
	writeJSON(w, http.StatusOK, true)
}
