package apiv2

import (
	"net/http"

	"github.com/agentd/agentd/internal/core"
)

// callback registers a prompt's callbackUrl as the v1 routes do (see
// server.Callbacks), giving the prompt an id when the client sent none.
// The returned function forgets it again, for a prompt that is refused.
func (a *API) callback(r *http.Request, sid string, id *string, url string, noReply bool) (func(), *apiError) {
	if url == "" {
		return func() {}, nil
	}
	switch {
	case a.cfg.Callbacks == nil:
		return nil, invalid("callbackUrl: this server keeps no webhooks")
	case noReply:
		return nil, invalid("callbackUrl: a prompt with resume false starts no run to report")
	}
	if *id == "" {
		*id = core.NewID(core.PrefixMessage, false)
	}
	msg := *id
	if err := a.cfg.Callbacks.Register(r.Context(), sid, msg, url); err != nil {
		return nil, a.storeErr(err, sid)
	}
	return func() { a.cfg.Callbacks.Forget(r.Context(), sid, msg) }, nil
}
