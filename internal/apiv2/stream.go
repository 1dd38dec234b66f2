package apiv2

import (
	"net/http"
	"strconv"

	"github.com/agentd/agentd/internal/events"
	"github.com/agentd/agentd/internal/store"
)

// The event routes: the instance stream, a session's stream and its
// history, all read from the one durable log through a translator.

func (a *API) stream(w http.ResponseWriter, r *http.Request, sessionID string, d dialect) *apiError {
	after, ok, err := events.ParseCursor(r)
	if err != nil {
		return invalid("%v", err)
	}
	if sessionID != "" {
		if _, err := a.st.Session(r.Context(), sessionID); err != nil {
			return a.storeErr(err, sessionID)
		}
	}
	t := a.translator(r.Context(), d)
	// A key's stream ends with the key's revocation.
	ctx, stop := a.cfg.Keys.Watch(r.Context())
	defer stop()
	err = a.hub.Stream(ctx, w, a.st.EventBounds, events.StreamOptions{
		After: after, HasCursor: ok, SessionID: sessionID, Heartbeat: a.cfg.Heartbeat, Translate: t.frames,
		Filter: a.cfg.Keys.EventFilter(r.Context()),
	})
	if err != nil && r.Context().Err() == nil {
		a.log.Debug("event stream ended", "err", err)
	}
	return nil
}

// events is the instance stream: every event, in opencode 2's envelope.
func (a *API) events(w http.ResponseWriter, r *http.Request) *apiError {
	return a.stream(w, r, "", instanceStream)
}

// sessionEvents is one session's durable events: replayed after the
// cursor with no gap and no duplicate, then live.
func (a *API) sessionEvents(w http.ResponseWriter, r *http.Request) *apiError {
	return a.stream(w, r, r.PathValue("sessionID"), sessionStream)
}

// historyJSON is opencode 2's SessionHistory.
type historyJSON struct {
	Data    []v2Event `json:"data"`
	HasMore bool      `json:"hasMore"`
}

// history pages through a session's durable events after a seq (?after=,
// default the start of the log): whole log events only, so that the last
// item's durable seq is the next page's after.
func (a *API) history(w http.ResponseWriter, r *http.Request) *apiError {
	sid := r.PathValue("sessionID")
	limit, e := pageLimit(r, 100, 100)
	if e != nil {
		return e
	}
	var after int64
	if v := r.URL.Query().Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return invalid("after: %q is not an event seq", v)
		}
		after = n
	}
	if _, err := a.st.Session(r.Context(), sid); err != nil {
		return a.storeErr(err, sid)
	}
	t := a.translator(r.Context(), sessionStream)
	out := historyJSON{Data: []v2Event{}}
	for {
		evs, err := a.st.Events(r.Context(), store.EventQuery{After: after, SessionID: sid, Limit: 256})
		if err != nil {
			return a.storeErr(err, sid)
		}
		for _, ev := range evs {
			list := t.events(ev)
			if len(out.Data)+len(list) > limit && len(out.Data) > 0 {
				out.HasMore = true
				writeJSON(w, http.StatusOK, out)
				return nil
			}
			out.Data = append(out.Data, list...)
			after = ev.Seq
		}
		if len(evs) < 256 {
			break
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
