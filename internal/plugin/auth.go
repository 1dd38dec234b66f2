package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/agentd/agentd/internal/llm"
)

// Credentials is the store of the providers' credentials (PUT /auth/{id},
// package credential), read and written as opencode's Auth objects
// ({type: "oauth", refresh, access, expires} or {type: "api", key}).
type Credentials interface {
	Auth(providerID string) (json.RawMessage, bool)
	SetAuth(providerID string, auth json.RawMessage) error
}

// authHost is the host's side of opencode's auth and provider hooks: the
// loaders already run, the model calls streaming through a plugin's
// fetch, the credential store the plugins read and write.
type authHost struct {
	creds   Credentials
	mu      sync.Mutex
	loaded  map[loadKey]*loaded
	fetches map[string]*fetchStream
	seq     int64
}

// loadKey names one run of a provider's loaders: per host process (a
// restarted host runs them again), directory and kind of stored
// credential (a login that replaces a key runs them again; a refreshed
// token does not: the plugin's fetch reads it through getAuth).
type loadKey struct {
	p                   *proc
	dir, provider, kind string
}

// loaded is what a provider's loaders returned: options for the
// provider (apiKey, baseURL, headers, ...) and whether a fetch stands in
// front of its calls.
type loaded struct {
	ready   chan struct{}
	err     error
	Options map[string]any `json:"options"`
	Fetch   bool           `json:"fetch"`
}

// SetCredentials gives the plugins the credential store (getAuth, the
// logins' callbacks). Call it before the first model call.
func (h *Host) SetCredentials(c Credentials) {
	h.auth.mu.Lock()
	h.auth.creds = c
	h.auth.mu.Unlock()
}

func (h *Host) credentials() Credentials {
	h.auth.mu.Lock()
	defer h.auth.mu.Unlock()
	return h.auth.creds
}

// AuthInfo is what a directory's plugins offer for providers: login
// methods (opencode's ProviderAuthMethod) and loaders by provider, and
// the providers whose models a provider hook gives.
type AuthInfo struct {
	Auth map[string]struct {
		Methods []json.RawMessage `json:"methods"`
		Loader  bool              `json:"loader"`
	} `json:"auth"`
	Providers []string `json:"providers"`
}

// call makes one request of the directory's instance, bounded by d.
func (h *Host) call(ctx context.Context, dir, method string, d time.Duration, params map[string]any, out any) error {
	p, err := h.current(ctx)
	if err != nil {
		return err
	}
	if _, err := h.instance(ctx, p, dir); err != nil {
		return err
	}
	params["directory"] = dir
	cctx, cancel := context.WithTimeoutCause(ctx, d, fmt.Errorf("no answer within %s (agentd.plugins.timeout)", d))
	defer cancel()
	if err := p.conn.call(cctx, method, params, out); err != nil {
		h.timedOut(p, err)
		return &HookError{Message: fmt.Sprintf("plugin %s: %v", method, err)}
	}
	return nil
}

// DescribeAuth says what the directory's plugins offer for providers.
func (h *Host) DescribeAuth(ctx context.Context, dir string) (AuthInfo, error) {
	var info AuthInfo
	err := h.call(ctx, dir, "auth.describe", h.opts.Timeout, map[string]any{}, &info)
	return info, err
}

// load runs the provider's loaders for the directory once per kind of
// stored credential (see loadKey); a failed run is not kept. info, the
// provider as the loaders get it, is built only when they run.
func (h *Host) load(ctx context.Context, dir, provider, kind string, info func() map[string]any) (*loaded, error) {
	p, err := h.current(ctx)
	if err != nil {
		return nil, err
	}
	key := loadKey{p, dir, provider, kind}
	h.auth.mu.Lock()
	if h.auth.loaded == nil {
		h.auth.loaded = map[loadKey]*loaded{}
	}
	l := h.auth.loaded[key]
	if l == nil {
		l = &loaded{ready: make(chan struct{})}
		h.auth.loaded[key] = l
		h.auth.mu.Unlock()
		l.err = h.call(context.WithoutCancel(ctx), dir, "auth.load", h.opts.Timeout, map[string]any{"provider": provider, "info": info()}, l)
		if l.err != nil {
			h.auth.mu.Lock()
			delete(h.auth.loaded, key)
			h.auth.mu.Unlock()
		}
		close(l.ready)
	} else {
		h.auth.mu.Unlock()
	}
	select {
	case <-l.ready:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	if l.err != nil {
		return nil, &llm.APIError{Message: fmt.Sprintf("the auth loader of provider %s: %v", provider, l.err), Retryable: true, MaxAttempts: 2}
	}
	return l, nil
}

// AuthError is a login step refused the way opencode refuses it: Name is
// one of opencode's ProviderAuthError names.
type AuthError struct {
	Name, ProviderID, Field, Message string
}

func (e *AuthError) Error() string {
	if e.Message != "" {
		return e.Name + ": " + e.Message
	}
	return e.Name
}

// AuthMethods are the login methods of the directory's plugins by
// provider (GET /provider/auth).
func (h *Host) AuthMethods(ctx context.Context, dir string) (map[string][]json.RawMessage, error) {
	info, err := h.DescribeAuth(ctx, dir)
	if err != nil {
		return nil, err
	}
	out := map[string][]json.RawMessage{}
	for id, a := range info.Auth {
		out[id] = append([]json.RawMessage{}, a.Methods...)
	}
	return out, nil
}

type stepAnswer struct {
	Error         string          `json:"error"`
	Field         string          `json:"field"`
	Message       string          `json:"message"`
	Authorization json.RawMessage `json:"authorization"`
	Result        json.RawMessage `json:"result"`
}

func (a stepAnswer) err(provider string) error {
	if a.Error == "" {
		return nil
	}
	return &AuthError{Name: a.Error, ProviderID: provider, Field: a.Field, Message: a.Message}
}

// Authorize begins a provider's OAuth login (the method's authorize): the
// URL to open and how the login ends ("auto" or "code"); nil for a method
// that is not OAuth.
func (h *Host) Authorize(ctx context.Context, dir, provider string, method int, inputs map[string]string) (json.RawMessage, error) {
	var a stepAnswer
	if err := h.call(ctx, dir, "auth.authorize", h.opts.Timeout, map[string]any{"provider": provider, "method": method, "inputs": inputs}, &a); err != nil {
		return nil, err
	}
	return a.Authorization, a.err(provider)
}

// Callback ends a provider's OAuth login (the authorization's callback,
// with the code the user pasted for a "code" login) and stores the
// credential it gives, as opencode does. An "auto" login waits for the
// browser: it is bounded by five minutes, not the hook timeout.
func (h *Host) Callback(ctx context.Context, dir, provider string, method int, code string) error {
	var a stepAnswer
	params := map[string]any{"provider": provider, "method": method, "code": code}
	if err := h.call(ctx, dir, "auth.callback", max(h.opts.Timeout, 5*time.Minute), params, &a); err != nil {
		return err
	}
	if err := a.err(provider); err != nil {
		return err
	}
	auth, err := storedAuth(a.Result)
	if err != nil {
		return &AuthError{Name: "ProviderAuthOauthCallbackFailed", ProviderID: provider, Message: err.Error()}
	}
	creds := h.credentials()
	if creds == nil {
		return errors.New("no credential store to keep the login in")
	}
	return creds.SetAuth(provider, auth)
}

// storedAuth is what opencode stores of a successful callback: an API key
// (with its metadata) or the OAuth tokens with what else the plugin gave.
func storedAuth(res json.RawMessage) (json.RawMessage, error) {
	var all map[string]any
	if err := json.Unmarshal(res, &all); err != nil {
		return nil, err
	}
	if key, ok := all["key"]; ok {
		out := map[string]any{"type": "api", "key": key}
		if md, ok := all["metadata"]; ok {
			out["metadata"] = md
		}
		return json.Marshal(out)
	}
	if _, ok := all["refresh"]; !ok {
		return nil, errors.New("the plugin's callback gave neither a key nor tokens")
	}
	delete(all, "provider")
	all["type"] = "oauth"
	return json.Marshal(all)
}

// serveAuth answers the host's requests of the auth hooks (getAuth) and
// the notifications of the fetches' bodies; false for any other message.
func (h *Host) serveAuth(m message) (any, bool, error) {
	switch m.Method {
	case "auth.get":
		var p struct {
			Provider string `json:"provider"`
		}
		if err := json.Unmarshal(m.Params, &p); err != nil {
			return nil, true, err
		}
		if c := h.credentials(); c != nil {
			if a, ok := c.Auth(p.Provider); ok {
				return a, true, nil
			}
		}
		return nil, true, nil
	case "fetch.chunk", "fetch.end":
		h.fetchEvent(m)
		return nil, true, nil
	}
	return nil, false, nil
}

// providerInfo is opencode's Provider as a loader or a provider hook gets
// it: the provider's id and its models.
func providerInfo(id string, models map[string]llm.Model) map[string]any {
	ms := map[string]any{}
	ids := make([]string, 0, len(models))
	for mid := range models {
		ids = append(ids, mid)
	}
	sort.Strings(ids)
	for _, mid := range ids {
		m := models[mid]
		cost := map[string]any{"input": 0, "output": 0, "cache": map[string]any{"read": 0, "write": 0}}
		if m.Cost != nil {
			cost = map[string]any{"input": m.Cost.Input, "output": m.Cost.Output,
				"cache": map[string]any{"read": m.Cost.CacheRead, "write": m.Cost.CacheWrite}}
		}
		ms[mid] = map[string]any{"id": mid, "providerID": id, "name": mid, "api": map[string]any{"id": m.Name},
			"cost": cost, "limit": map[string]any{"context": m.Context, "output": m.Output}, "options": orEmpty(m.Options),
			"headers": map[string]any{}, "status": "active"}
	}
	return map[string]any{"id": id, "name": id, "source": "config", "env": []string{}, "options": map[string]any{}, "models": ms}
}

// authProvider is a provider that a plugin's auth hook serves: with a
// stored credential its loaders' options set the client up and their
// fetch carries its calls; without one it is the provider as configured.
type authProvider struct {
	h     *Host
	id    string
	dir   string // for calls that name no directory (titles)
	setup llm.Setup
	base  llm.Provider  // nil: not configured without the plugin
	reg   *llm.Registry // its models, for the loader

	mu    sync.Mutex
	built map[string]builtClient // by directory
}

// Stream implements llm.Provider.
func (a *authProvider) Stream(ctx context.Context, req llm.Request, emit func(llm.Event) error) error {
	var stored json.RawMessage
	ok := false
	if c := a.h.credentials(); c != nil {
		stored, ok = c.Auth(a.id)
	}
	if !ok {
		if a.base == nil {
			return &llm.APIError{Message: fmt.Sprintf("provider %s has no stored login: log in (POST /provider/%s/oauth/authorize) or %s", a.id, a.id, a.setup.Missing), Auth: true}
		}
		return a.base.Stream(ctx, req, emit)
	}
	var auth struct {
		Type string `json:"type"`
		Key  string `json:"key"`
	}
	_ = json.Unmarshal(stored, &auth)
	dir := req.Directory
	if dir == "" {
		dir = a.dir
	}
	l, err := a.h.load(ctx, dir, a.id, auth.Type, func() map[string]any {
		_, models, _ := a.reg.Lookup(a.id)
		return providerInfo(a.id, models)
	})
	if err != nil {
		return err
	}
	return a.client(dir, l, auth.Key).Stream(ctx, req, emit)
}

// builtClient is a directory's client and what it was built from: a
// loaders' result is not changed once made, so the pointer names its
// options without encoding them on every model call.
type builtClient struct {
	l         *loaded
	storedKey string
	p         llm.Provider
}

// client is the provider's client set up with the loaders' options, one
// per directory, built again when the loaders ran again or the stored key
// changed.
func (a *authProvider) client(dir string, l *loaded, storedKey string) llm.Provider {
	a.mu.Lock()
	defer a.mu.Unlock()
	if b := a.built[dir]; b.p != nil && b.l == l && b.storedKey == storedKey {
		return b.p
	}
	c := a.setup.Conn
	if storedKey != "" {
		c.APIKey = storedKey
	}
	if v, ok := l.Options["apiKey"].(string); ok {
		c.APIKey = v
	}
	if v, ok := l.Options["baseURL"].(string); ok && v != "" {
		c.BaseURL = v
	}
	if hs, ok := l.Options["headers"].(map[string]any); ok {
		merged := map[string]string{}
		for k, v := range c.Headers {
			merged[k] = v
		}
		for k, v := range hs {
			if s, ok := v.(string); ok {
				merged[k] = s
			}
		}
		c.Headers = merged
	}
	if l.Fetch {
		c.HTTPClient = &http.Client{Transport: &fetchTransport{h: a.h, dir: dir, provider: a.id}}
		if c.APIKey == "" {
			// The SDKs refuse to build a request without a key; the
			// plugin's fetch sets its own (see fetchTransport).
			c.APIKey = noKey
		}
	}
	if a.built == nil {
		a.built = map[string]builtClient{}
	}
	p := a.setup.Build(c)
	a.built[dir] = builtClient{l: l, storedKey: storedKey, p: p}
	return p
}
