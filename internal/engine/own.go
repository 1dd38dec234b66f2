package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/modelview"
	"github.com/agentd/agentd/internal/store"
)

// A step's history is the transcript up to it, and the run wrote most of
// that transcript itself: its steps' messages, their parts, its tool
// calls' results. Reading all of that back before every step was a seventh
// of the server's CPU (a SQLite query, and JSON decoding of what the
// runner had just encoded), so the runner keeps its part of the transcript
// (r.own) current from its own committed writes, and asks the store only
// which messages exist after the last one it placed: their ids and
// positions, no contents.
//
// That is exact because nothing else changes a running run's messages:
// one runner per session (the session's runs execute one at a time, on
// one node under a lease), a revert waits for the session to be idle, and
// permission and question replies leave the parts to the runner. What
// others may do is add messages (a prompt steered into the run): those
// show up in the list of positions, and the run's part is then read from
// the store whole. So is it whenever a write of the runner's own is one it
// cannot follow (a retirement, a message it never placed): the store is
// the truth on any doubt. Config.CheckHistory compares the two at every
// step, and the engine's tests run with it.

// ownWrite is one committed write of the runner to messages and parts.
type ownWrite struct {
	part    *core.Part
	message *core.Message
	// doubt marks a write the transcript cannot follow (a retirement).
	doubt bool
}

// ownWrites carries a runner's committed writes from the goroutine that
// committed them (the runner's, or its flush timer's) to the runner's next
// step.
type ownWrites struct {
	mu     sync.Mutex
	writes []ownWrite
}

func (o *ownWrites) add(w []ownWrite) {
	if len(w) == 0 {
		return
	}
	o.mu.Lock()
	o.writes = append(o.writes, w...)
	o.mu.Unlock()
}

func (o *ownWrites) take() []ownWrite {
	o.mu.Lock()
	defer o.mu.Unlock()
	w := o.writes
	o.writes = nil
	return w
}

// ownTx is a runner's transaction: it notes the writes to messages and
// parts that succeed, for the runner to apply once the transaction has
// committed.
type ownTx struct {
	store.Tx
	wrote *[]ownWrite
}

func (t ownTx) note(err error, w ownWrite) error {
	if err == nil {
		*t.wrote = append(*t.wrote, w)
	}
	return err
}

func (t ownTx) PutPart(ctx context.Context, p core.Part) error {
	return t.note(t.Tx.PutPart(ctx, p), ownWrite{part: &p})
}

func (t ownTx) PutPartJSON(ctx context.Context, p core.Part, data []byte) error {
	return t.note(t.Tx.PutPartJSON(ctx, p, data), ownWrite{part: &p})
}

func (t ownTx) PutMessage(ctx context.Context, m core.Message) error {
	return t.note(t.Tx.PutMessage(ctx, m), ownWrite{message: &m})
}

func (t ownTx) PutMessageJSON(ctx context.Context, m core.Message, data []byte) error {
	return t.note(t.Tx.PutMessageJSON(ctx, m, data), ownWrite{message: &m})
}

func (t ownTx) InsertMessage(ctx context.Context, m core.Message) error {
	return t.note(t.Tx.InsertMessage(ctx, m), ownWrite{message: &m})
}

func (t ownTx) RetireFrom(ctx context.Context, sessionID, messageID, partID, by string) ([]string, []string, error) {
	msgs, parts, err := t.Tx.RetireFrom(ctx, sessionID, messageID, partID, by)
	return msgs, parts, t.note(err, ownWrite{doubt: true})
}

func (t ownTx) DeleteSession(ctx context.Context, id string) error {
	return t.note(t.Tx.DeleteSession(ctx, id), ownWrite{doubt: true})
}

// transcript is the run's part of the transcript, from its first user
// message on: r.own brought up to date with the run's own writes when the
// store confirms that no other message was added, read from the store
// otherwise.
func (r *runner) transcript(ctx context.Context) ([]core.MessageWithParts, error) {
	ok, err := r.settleOwn(ctx)
	if err != nil {
		return nil, err
	}
	if ok {
		if r.e.cfg.CheckHistory {
			if err := r.checkOwn(ctx); err != nil {
				return nil, err
			}
		}
		return r.own, nil
	}
	msgs, err := r.e.st.Messages(ctx, r.run.SessionID, store.MessageQuery{Since: r.run.UserMessageID})
	if err != nil {
		return nil, err
	}
	r.own = msgs
	return msgs, nil
}

// settleOwn applies the run's committed writes to r.own and places its
// new messages; false, with r.own dropped, when it must be read again.
func (r *runner) settleOwn(ctx context.Context) (bool, error) {
	writes := r.wrote.take()
	if r.own != nil && r.applyOwn(writes) {
		ok, err := r.placeOwn(ctx)
		if ok && err == nil {
			return true, nil
		}
		r.own = nil
		return false, err
	}
	r.own = nil
	return false, nil
}

// applyOwn applies the run's committed writes to r.own; false when one of
// them is not the run's to follow.
func (r *runner) applyOwn(writes []ownWrite) bool {
	at := make(map[string]int, len(r.own))
	for i, m := range r.own {
		at[m.Info.ID] = i
	}
	for _, w := range writes {
		switch {
		case w.doubt:
			return false
		case w.part != nil:
			if w.part.SessionID != r.run.SessionID {
				continue
			}
			i, ok := at[w.part.MessageID]
			if !ok {
				return false
			}
			p := *w.part
			if p.Type == core.PartTool {
				p.State.Input = core.StoredInput(p.State.Input)
			}
			r.own[i].Parts = putPart(r.own[i].Parts, p)
		case w.message != nil:
			if w.message.SessionID != r.run.SessionID {
				continue
			}
			info := *w.message
			if i, ok := at[info.ID]; ok {
				// The store set its position; the writer's copy may not
				// know it.
				info.Seq = r.own[i].Info.Seq
				r.own[i].Info = info
				continue
			}
			info.Seq = 0 // placed by placeOwn
			at[info.ID] = len(r.own)
			r.own = append(r.own, core.MessageWithParts{Info: info, Parts: []core.Part{}})
		}
	}
	return true
}

// putPart replaces the part with p's id, or appends p: the store keeps a
// message's parts in the order they were first written.
func putPart(parts []core.Part, p core.Part) []core.Part {
	for i := range parts {
		if parts[i].ID == p.ID {
			parts[i] = p
			return parts
		}
	}
	return append(parts, p)
}

// placeOwn asks the store which messages follow the last one r.own has
// placed, and gives the run's new messages their positions; false when
// the store lists a message the run did not write, or leaves out one it
// did.
func (r *runner) placeOwn(ctx context.Context) (bool, error) {
	var after int64
	for _, m := range r.own {
		after = max(after, m.Info.Seq)
	}
	seqs, err := r.e.st.MessageSeqs(ctx, r.run.SessionID, after)
	if err != nil {
		return false, err
	}
	at := make(map[string]int, len(seqs))
	for i, m := range r.own {
		if m.Info.Seq == 0 {
			at[m.Info.ID] = i
		}
	}
	for _, s := range seqs {
		i, ok := at[s.ID]
		if !ok {
			return false, nil
		}
		r.own[i].Info.Seq = s.Seq
	}
	for i, m := range r.own {
		if m.Info.Seq == 0 || (i > 0 && m.Info.Seq <= r.own[i-1].Info.Seq) {
			return false, nil
		}
	}
	return true, nil
}

// checkOwn compares r.own with the store's transcript as the model would
// see both, and their messages' positions.
func (r *runner) checkOwn(ctx context.Context) error {
	stored, err := r.e.st.Messages(ctx, r.run.SessionID, store.MessageQuery{Since: r.run.UserMessageID})
	if err != nil {
		return err
	}
	view := func(msgs []core.MessageWithParts) any {
		out, parent := modelview.Compose(r.run.ID, msgs, nil)
		seqs := make([]store.MessageSeq, len(msgs))
		for i, m := range msgs {
			seqs[i] = store.MessageSeq{ID: m.Info.ID, Seq: m.Info.Seq}
		}
		return map[string]any{"messages": out, "parent": parent, "seqs": seqs}
	}
	return r.compareViews("transcript from its own writes", view(r.own), view(stored))
}

// checkPrefix compares the conversation before the run, as the session's
// cache gave it, with a whole read.
func (r *runner) checkPrefix(ctx context.Context, prefix []llm.Message) error {
	whole, err := (&modelview.Cache{}).Prefix(ctx, r.e.st, r.run)
	if err != nil {
		return err
	}
	return r.compareViews("conversation before it from the cache", prefix, whole)
}

// compareViews fails when what the model would be sent from kept state
// differs from what the store gives.
func (r *runner) compareViews(what string, kept, stored any) error {
	a, errA := json.Marshal(kept)
	b, errB := json.Marshal(stored)
	if err := errors.Join(errA, errB); err != nil {
		return err
	}
	if !bytes.Equal(a, b) {
		return fmt.Errorf("run %s: the %s differs from the store's:\nkept:  %s\nstore: %s", r.run.ID, what, a, b)
	}
	return nil
}
