package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/agentd/agentd/internal/access"
	"github.com/agentd/agentd/internal/core"
)

// Key is an API key as the server shows it; Token is set only in the
// answer that made it.
type Key = access.KeyInfo

// Budget caps spend: tokens and US dollars (zero: that figure uncapped).
type Budget = core.Budget

// CreateKey makes an API key (the operator's: the password, not a key).
// sessions is "own" or "all"; budget may be nil.
func (c *Client) CreateKey(ctx context.Context, name, sessions string, budget *Budget) (Key, error) {
	var k Key
	body := map[string]any{"name": name, "sessions": sessions}
	if budget != nil {
		body["budget"] = budget
	}
	err := c.do(ctx, http.MethodPost, "/key", body, &k)
	return k, err
}

// Keys lists the API keys, revoked ones included.
func (c *Client) Keys(ctx context.Context) ([]Key, error) {
	var out []Key
	err := c.do(ctx, http.MethodGet, "/key", nil, &out)
	return out, err
}

// RevokeKey revokes a key by id or name.
func (c *Client) RevokeKey(ctx context.Context, idOrName string) (Key, error) {
	var k Key
	err := c.do(ctx, http.MethodDelete, "/key/"+url.PathEscape(idOrName), nil, &k)
	return k, err
}

// SetKeyBudget replaces a key's caps (nil: none).
func (c *Client) SetKeyBudget(ctx context.Context, idOrName string, budget *Budget) (Key, error) {
	var k Key
	err := c.do(ctx, http.MethodPatch, "/key/"+url.PathEscape(idOrName), map[string]any{"budget": budget}, &k)
	return k, err
}

// SetSessionBudget caps what a session's model calls may spend (nil:
// no caps).
func (c *Client) SetSessionBudget(ctx context.Context, sessionID string, budget *Budget) (Session, error) {
	var s Session
	b := budget
	if b == nil {
		b = &Budget{}
	}
	err := c.do(ctx, http.MethodPatch, "/session/"+url.PathEscape(sessionID), map[string]any{"budget": b}, &s)
	return s, err
}
