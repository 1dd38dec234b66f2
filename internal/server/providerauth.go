package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/agentd/agentd/internal/plugin"
)

// ProviderAuth is the providers' logins that plugins offer (opencode's
// auth hook; *plugin.Host): their methods, and the two steps of an OAuth
// login, whose callback stores the credential.
type ProviderAuth interface {
	AuthMethods(ctx context.Context, dir string) (map[string][]json.RawMessage, error)
	Authorize(ctx context.Context, dir, providerID string, method int, inputs map[string]string) (json.RawMessage, error)
	Callback(ctx context.Context, dir, providerID string, method int, code string) error
}

// authorizeBody is the body of POST /provider/{id}/oauth/authorize.
type authorizeBody struct {
	Method float64           `json:"method" doc:"required"`
	Inputs map[string]string `json:"inputs,omitempty"`
}

// authorization is opencode's ProviderAuthAuthorization.
type authorization struct {
	URL          string `json:"url"`
	Method       string `json:"method"`
	Instructions string `json:"instructions"`
}

// providerAuth answers GET /provider/auth: the plugins' login methods by
// provider (none without plugins).
func (s *Server) providerAuth(w http.ResponseWriter, r *http.Request) *apiError {
	out := map[string][]json.RawMessage{}
	if s.cfg.ProviderAuth != nil {
		dir, e := s.directory(r)
		if e != nil {
			return e
		}
		m, err := s.cfg.ProviderAuth.AuthMethods(r.Context(), dir)
		if err != nil {
			return authFailure(err)
		}
		out = m
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) oauthAuthorize(w http.ResponseWriter, r *http.Request) *apiError {
	if s.cfg.ProviderAuth == nil {
		return s.oauth(w, r)
	}
	var in authorizeBody
	if e := decodeJSON(r, &in, false); e != nil {
		return e
	}
	dir, e := s.directory(r)
	if e != nil {
		return e
	}
	a, err := s.cfg.ProviderAuth.Authorize(r.Context(), dir, r.PathValue("providerID"), int(in.Method), in.Inputs)
	if err != nil {
		return authFailure(err)
	}
	if len(a) == 0 {
		a = json.RawMessage("null") // a method that is not OAuth, as opencode answers it
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}

func (s *Server) oauthCallback(w http.ResponseWriter, r *http.Request) *apiError {
	if s.cfg.ProviderAuth == nil {
		return s.oauth(w, r)
	}
	var in oauthBody
	if e := decodeJSON(r, &in, false); e != nil {
		return e
	}
	dir, e := s.directory(r)
	if e != nil {
		return e
	}
	if err := s.cfg.ProviderAuth.Callback(r.Context(), dir, r.PathValue("providerID"), int(in.Method), in.Code); err != nil {
		return authFailure(err)
	}
	writeJSON(w, http.StatusOK, true)
	return nil
}

// authFailure answers a refused login step with opencode's
// ProviderAuthError, and a plugin's failure as a 500 with its message.
func authFailure(err error) *apiError {
	var ae *plugin.AuthError
	if errors.As(err, &ae) {
		data := map[string]string{}
		for k, v := range map[string]string{"providerID": ae.ProviderID, "field": ae.Field, "message": ae.Message} {
			if v != "" {
				data[k] = v
			}
		}
		return &apiError{status: http.StatusBadRequest, body: map[string]any{"name": ae.Name, "data": data}}
	}
	return &apiError{status: http.StatusInternalServerError, name: "UnknownError", msg: err.Error()}
}

// authMethodDoc documents one login method (opencode's ProviderAuthMethod);
// the plugins' own objects are answered as they give them.
type authMethodDoc struct {
	Type    string            `json:"type" doc:"required"`
	Label   string            `json:"label" doc:"required"`
	Prompts []json.RawMessage `json:"prompts,omitempty"`
}
