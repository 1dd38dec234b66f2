package modelview

import (
	"context"
	"sync"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/store"
)

// cacheBytes bounds the text the converted histories keep, rather than
// their number: a thousand busy sessions of a few turns each fit in a few
// megabytes, and one huge transcript cannot crowd out the others for long.
const cacheBytes = 32 << 20

// Cache keeps, per session, the model's view of the transcript up to some
// message, so that each run reads only what was written since. The zero
// Cache is empty and ready; a new zero Cache reads everything (a whole
// read, to compare with).
//
// It is safe because a run starts only when the session's earlier runs have
// ended (one executor per session), and an ended run's messages no longer
// change: everything before a run's first user message is final when the
// run starts. A compaction changes the view of earlier messages (pruned
// outputs, a summary): it drops the session's entry.
type Cache struct {
	mu      sync.Mutex
	entries map[string]*entry
	bytes   int // sum of the entries' sizes
}

type entry struct {
	through    string // id of the last message included
	throughSeq int64  // and its position
	msgs       []llm.Message
	size       int
}

// sizeOf approximates the memory a converted history holds.
func sizeOf(msgs []llm.Message) int {
	n := 0
	for _, m := range msgs {
		n += 64
		if m.From != nil {
			n += 256 + len(m.From.System) + len(m.From.Structured)
		}
		for _, c := range m.Content {
			n += 64 + len(c.Text) + len(c.Input) + len(c.Data)
			if c.Part != nil {
				n += 64 + len(c.Part.Title) + valueSize(c.Part.Metadata)
			}
		}
	}
	return n
}

// valueSize approximates the memory a decoded JSON value holds (a tool's
// metadata can carry whole files: an edit's before and after).
func valueSize(v any) int {
	switch v := v.(type) {
	case string:
		return 16 + len(v)
	case map[string]any:
		n := 48
		for k, x := range v {
			n += 16 + len(k) + valueSize(x)
		}
		return n
	case []any:
		n := 24
		for _, x := range v {
			n += valueSize(x)
		}
		return n
	}
	return 16
}

// newEntry is the view msgs, through the message through at position
// seq; its capacity is cut so that no run appends into it.
func newEntry(through string, seq int64, msgs []llm.Message) *entry {
	return &entry{through: through, throughSeq: seq, msgs: msgs[:len(msgs):len(msgs)], size: sizeOf(msgs)}
}

// put keeps e for the session and evicts other entries, arbitrary ones,
// until the cache is within its budget. c.mu is held.
func (c *Cache) put(sessionID string, e *entry) {
	if c.entries == nil {
		c.entries = make(map[string]*entry)
	}
	if old, ok := c.entries[sessionID]; ok {
		c.bytes -= old.size
	}
	c.entries[sessionID] = e
	c.bytes += e.size
	for k, v := range c.entries {
		if c.bytes <= cacheBytes {
			break
		}
		if v != e {
			delete(c.entries, k)
			c.bytes -= v.size
		}
	}
}

// Put keeps msgs as the session's view through the message through, at
// position seq, in place of what the session had.
func (c *Cache) Put(sessionID, through string, seq int64, msgs []llm.Message) {
	c.mu.Lock()
	c.put(sessionID, newEntry(through, seq, msgs))
	c.mu.Unlock()
}

// Keep is Put unless the session's kept view already reaches as far.
func (c *Cache) Keep(sessionID, through string, seq int64, msgs []llm.Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[sessionID]; ok && e.throughSeq >= seq {
		return
	}
	c.put(sessionID, newEntry(through, seq, msgs))
}

// Through is the id of the last message of the session's kept view (""
// for none).
func (c *Cache) Through(sessionID string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[sessionID]; ok {
		return e.through
	}
	return ""
}

// Drop forgets a session's view.
func (c *Cache) Drop(sessionID string) {
	c.mu.Lock()
	if e, ok := c.entries[sessionID]; ok {
		c.bytes -= e.size
		delete(c.entries, sessionID)
	}
	c.mu.Unlock()
}

// Prefix returns the conversation before the run's first user message.
func (c *Cache) Prefix(ctx context.Context, st store.Reader, run core.Run) ([]llm.Message, error) {
	return c.PrefixAt(ctx, st, run, 0)
}

// PrefixAt is Prefix given the position of the run's first user message
// (0: read it).
func (c *Cache) PrefixAt(ctx context.Context, st store.Reader, run core.Run, at int64) ([]llm.Message, error) {
	if at == 0 {
		first, err := st.Message(ctx, run.SessionID, run.UserMessageID)
		if err != nil {
			return nil, err
		}
		at = first.Info.Seq
	}
	c.mu.Lock()
	var base *entry
	if e, ok := c.entries[run.SessionID]; ok && e.throughSeq < at {
		base = e
	}
	c.mu.Unlock()
	if base != nil {
		// A revert retires messages from a point on (or a message's parts
		// from a point on and the messages after it): the kept view is
		// stale exactly when its last message lost itself or a part.
		// Another node may have made the revert, so the store says.
		intact, err := st.MessageIntact(ctx, run.SessionID, base.through)
		if err != nil {
			return nil, err
		}
		if !intact {
			base = nil
		}
	}

	q := store.MessageQuery{Before: run.UserMessageID}
	if base != nil {
		q.After = base.through
	}
	msgs, err := st.Messages(ctx, run.SessionID, q)
	if err != nil {
		return nil, err
	}
	var out []llm.Message
	through, throughSeq := "", int64(0)
	switch {
	case base != nil && Latest(msgs) == nil:
		// A copy, so that runs never share a backing array.
		out = make([]llm.Message, len(base.msgs), len(base.msgs)+len(msgs)+8)
		copy(out, base.msgs)
		out, _ = Convert(run.ID, msgs, out)
		through, throughSeq = base.through, base.throughSeq
	case base != nil:
		// A compaction arrived since: build the view afresh.
		if msgs, err = st.Messages(ctx, run.SessionID, store.MessageQuery{Before: run.UserMessageID}); err != nil {
			return nil, err
		}
		out, _ = Compose(run.ID, msgs, nil)
	default:
		out, _ = Compose(run.ID, msgs, nil)
	}
	if len(msgs) > 0 {
		through, throughSeq = msgs[len(msgs)-1].Info.ID, msgs[len(msgs)-1].Info.Seq
	}
	if through != "" {
		c.Put(run.SessionID, through, throughSeq, out)
	}
	return out, nil
}
