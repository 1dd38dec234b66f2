package apiv2

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// The transcript's reads: a page of messages, one message, and the
// context the model sees.

// messagesPage is opencode 2's SessionMessagesResponse.
type messagesPage struct {
	Data   []any      `json:"data"`
	Cursor pageCursor `json:"cursor"`
}

// msgCursor names a page of messages: those older (D "older") or newer
// ("newer") than message I (at position S), listed in order O.
type msgCursor struct {
	I string `json:"i"`
	S int64  `json:"s"`
	D string `json:"d"`
	O string `json:"o"`
}

// contextBytes bounds what a context answer reads of a long session.
const contextBytes = 8 << 20

// messages pages through the transcript by stored message (limit counts
// them; a step's idle or resume entry comes with it), newest first by
// default.
func (a *API) messages(w http.ResponseWriter, r *http.Request) *apiError {
	sid := r.PathValue("sessionID")
	limit, e := pageLimit(r, 50, 200)
	if e != nil {
		return e
	}
	at := msgCursor{D: "older", O: "desc"}
	if c := r.URL.Query().Get("cursor"); c != "" {
		if r.URL.Query().Get("order") != "" {
			return tagged(http.StatusBadRequest, "InvalidCursorError", "cursor: a cursor keeps its order; do not send order with it")
		}
		if e := decodeCursor(c, &at); e != nil {
			return e
		}
		if (at.D != "older" && at.D != "newer") || (at.O != "asc" && at.O != "desc") {
			return tagged(http.StatusBadRequest, "InvalidCursorError", "cursor: not a cursor of this list")
		}
	} else if o, e := pageOrder(r); e != nil {
		return e
	} else if o == "asc" {
		at = msgCursor{D: "newer", O: "asc"}
	}
	if _, err := a.st.Session(r.Context(), sid); err != nil {
		return a.storeErr(err, sid)
	}
	msgs, more, err := a.messageWindow(r.Context(), sid, at, limit)
	if err != nil {
		return a.storeErr(err, sid)
	}
	out := messagesPage{Data: entries(msgs)}
	if len(msgs) > 0 {
		oldest, newest := msgs[0].Info, msgs[len(msgs)-1].Info
		older := encodeCursor(msgCursor{I: oldest.ID, S: oldest.Seq, D: "older", O: at.O})
		newer := encodeCursor(msgCursor{I: newest.ID, S: newest.Seq, D: "newer", O: at.O})
		if at.O == "desc" {
			out.Cursor.Previous, out.Cursor.Next = newer, older
			slices.Reverse(out.Data)
		} else {
			out.Cursor.Previous, out.Cursor.Next = older, newer
		}
		// The side the page was read toward is left out once it is
		// known to be exhausted.
		if !more && at.D == "older" {
			clearSide(&out.Cursor, older)
		} else if !more {
			clearSide(&out.Cursor, newer)
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func clearSide(c *pageCursor, side string) {
	if c.Next == side {
		c.Next = ""
	}
	if c.Previous == side {
		c.Previous = ""
	}
}

// messageWindow reads limit stored messages (oldest first) older or newer
// than the cursor's message, and whether more lie that way.
func (a *API) messageWindow(ctx context.Context, sid string, at msgCursor, limit int) ([]core.MessageWithParts, bool, error) {
	if at.D == "older" {
		msgs, err := a.st.Messages(ctx, sid, store.MessageQuery{Before: at.I, Limit: limit + 1})
		if err != nil {
			return nil, false, err
		}
		if len(msgs) > limit {
			return msgs[1:], true, nil
		}
		return msgs, false, nil
	}
	seqs, err := a.st.MessageSeqs(ctx, sid, at.S)
	if err != nil || len(seqs) == 0 {
		return nil, false, err
	}
	q := store.MessageQuery{Since: seqs[0].ID}
	more := len(seqs) > limit
	if more {
		q.Before = seqs[limit].ID
	}
	msgs, err := a.st.Messages(ctx, sid, q)
	return msgs, more, err
}

// message answers one entry: a stored message's, or the resume note that
// follows a message a restart cut off.
func (a *API) message(w http.ResponseWriter, r *http.Request) *apiError {
	sid, mid := r.PathValue("sessionID"), r.PathValue("messageID")
	id, note := strings.CutSuffix(mid, "_resumed")
	m, err := a.st.Message(r.Context(), sid, id)
	if errors.Is(err, store.ErrNotFound) {
		if _, err := a.st.Session(r.Context(), sid); err != nil {
			return a.storeErr(err, sid)
		}
		return messageNotFound(sid, mid)
	}
	if err != nil {
		return a.storeErr(err, sid)
	}
	list := entries([]core.MessageWithParts{m})
	for _, e := range list {
		if s, ok := e.(syntheticEntry); ok && note && s.ID == mid {
			data(w, s)
			return nil
		}
	}
	if note || len(list) == 0 {
		return messageNotFound(sid, mid)
	}
	data(w, list[0])
	return nil
}

// context answers what the model sees of the session: its messages from
// its last compaction on (the compaction's summary first).
func (a *API) context(w http.ResponseWriter, r *http.Request) *apiError {
	sid := r.PathValue("sessionID")
	if _, err := a.st.Session(r.Context(), sid); err != nil {
		return a.storeErr(err, sid)
	}
	msgs, err := a.st.Messages(r.Context(), sid, store.MessageQuery{MaxBytes: contextBytes})
	if err != nil {
		return a.storeErr(err, sid)
	}
	from := 0
	for i, m := range msgs {
		if m.Info.Role != core.RoleUser || !slices.ContainsFunc(m.Parts, func(p core.Part) bool { return p.Type == core.PartCompaction }) {
			continue
		}
		// A compaction counts once its summary is written.
		for _, n := range msgs[i+1:] {
			if n.Info.Summary && n.Info.Completed != 0 && n.Info.Error == nil {
				from = i
				break
			}
		}
	}
	data(w, entries(msgs[from:]))
	return nil
}
