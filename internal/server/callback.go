package server

import (
	"context"
	"net/http"

	"github.com/agentd/agentd/internal/core"
)

// Callbacks keeps the callbackUrl a prompt carries (package webhook): the
// run that answers the prompt's message is reported to it when it ends.
type Callbacks interface {
	// Register records the URL for the message before the prompt is
	// admitted, so that it is durable before the run can end. Its errors
	// are the engine's kinds (an *engine.InputError for a bad URL or
	// webhooks that are off, store.ErrNotFound for a missing session).
	Register(ctx context.Context, sessionID, messageID, url string) error
	// Forget removes the URL of a prompt that was not admitted.
	Forget(ctx context.Context, sessionID, messageID string)
}

// callback registers a prompt's callbackUrl, giving the prompt a message
// id when the client sent none (the callback is keyed by it). The
// returned function forgets it again, for a prompt that is refused.
func (s *Server) callback(r *http.Request, messageID *string, url string, noReply bool) (func(), *apiError) {
	if url == "" {
		return func() {}, nil
	}
	switch {
	case s.cfg.Callbacks == nil:
		return nil, badRequest("callbackUrl: this server keeps no webhooks")
	case noReply:
		return nil, badRequest("callbackUrl: a prompt with noReply starts no run to report")
	}
	if *messageID == "" {
		*messageID = core.NewID(core.PrefixMessage, false)
	}
	id, msg := r.PathValue("id"), *messageID
	if err := s.cfg.Callbacks.Register(r.Context(), id, msg, url); err != nil {
		return nil, s.storeErr(err, "session "+id)
	}
	return func() { s.cfg.Callbacks.Forget(r.Context(), id, msg) }, nil
}
