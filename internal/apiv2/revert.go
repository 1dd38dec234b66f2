package apiv2

import (
	"context"
	"errors"
	"net/http"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/snapshot"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/undo"
)

// Revert as opencode 2 stages it, over the engine's revert point (the v1
// revert and unrevert): stage is a revert, clear an unrevert, and commit
// retires what the point hides, as the next prompt would.

type stageBody struct {
	MessageID string `json:"messageID" doc:"required"`
	// Files false would keep the files as they are: agentd's revert
	// always restores them (all or nothing), so it is refused.
	Files *bool `json:"files"`
}

// revertErr maps the engine's errors of a revert: busy or refused is a
// conflict that says why, an unknown message its 404.
func (a *API) revertErr(ctx context.Context, err error, sid, mid string) *apiError {
	var refused *snapshot.RefusedError
	var failed *undo.FailedError
	switch {
	case errors.Is(err, store.ErrNotFound):
		if _, serr := a.st.Session(ctx, sid); serr != nil || mid == "" {
			return sessionNotFound(sid)
		}
		return messageNotFound(sid, mid)
	case errors.As(err, &refused), errors.Is(err, snapshot.ErrTooLarge):
		return conflict("nothing was reverted: " + err.Error())
	case errors.As(err, &failed):
		return conflict(failed.Error())
	case errors.Is(err, undo.ErrUnavailable):
		return unsupported(err.Error())
	case errors.Is(err, undo.ErrStopped):
		return unavailable(err.Error())
	}
	return a.storeErr(err, sid)
}

func (a *API) revertStage(w http.ResponseWriter, r *http.Request) *apiError {
	sid := r.PathValue("sessionID")
	var in stageBody
	if e := decode(r, &in, false); e != nil {
		return e
	}
	if !core.ValidID(core.PrefixMessage, in.MessageID) {
		return invalid("messageID: %q is not a message id (msg_…)", in.MessageID)
	}
	if in.Files != nil && !*in.Files {
		return unsupported("files: false is not supported: agentd's revert restores the files of the steps it undoes, all or nothing")
	}
	sess, err := a.eng.Revert(r.Context(), sid, in.MessageID, "")
	if err != nil {
		return a.revertErr(r.Context(), err, sid, in.MessageID)
	}
	rev := revertOf(sess.Revert)
	if rev == nil {
		rev = &revertState{MessageID: in.MessageID}
	}
	data(w, rev)
	return nil
}

func (a *API) revertClear(w http.ResponseWriter, r *http.Request) *apiError {
	sid := r.PathValue("sessionID")
	if _, err := a.eng.Unrevert(r.Context(), sid); err != nil {
		return a.revertErr(r.Context(), err, sid, "")
	}
	noContent(w)
	return nil
}

func (a *API) revertCommit(w http.ResponseWriter, r *http.Request) *apiError {
	sid := r.PathValue("sessionID")
	if _, err := a.eng.CommitRevert(r.Context(), sid); err != nil {
		return a.revertErr(r.Context(), err, sid, "")
	}
	noContent(w)
	return nil
}
