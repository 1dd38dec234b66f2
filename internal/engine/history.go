package engine

import (
	"context"
	"sync"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/store"
)

// historyCacheSize bounds how many sessions keep a converted history.
const historyCacheSize = 256

// historyCache keeps, per session, the model's view of the transcript up to
// some message, so that each run reads only what was written since.
//
// It is safe because a run starts only when the session's earlier runs have
// ended (one executor per session), and an ended run's messages no longer
// change: everything before a run's first user message is final when the
// run starts.
type historyCache struct {
	mu      sync.Mutex
	entries map[string]*historyEntry
}

type historyEntry struct {
	through string // id of the last message included
	msgs    []llm.Message
}

// prefix returns the conversation before the run's first user message.
func (c *historyCache) prefix(ctx context.Context, st store.Reader, run core.Run,
	convert func([]core.MessageWithParts, []llm.Message) ([]llm.Message, string)) ([]llm.Message, error) {
	c.mu.Lock()
	var base *historyEntry
	if e, ok := c.entries[run.SessionID]; ok && e.through < run.UserMessageID {
		base = e
	}
	c.mu.Unlock()

	q := store.MessageQuery{Before: run.UserMessageID}
	var prev []llm.Message
	if base != nil {
		q.After = base.through
		prev = base.msgs
	}
	msgs, err := st.Messages(ctx, run.SessionID, q)
	if err != nil {
		return nil, err
	}
	// A copy, so that runs never share a backing array.
	out := make([]llm.Message, len(prev), len(prev)+len(msgs)+8)
	copy(out, prev)
	out, _ = convert(msgs, out)
	through := ""
	if base != nil {
		through = base.through
	}
	if len(msgs) > 0 {
		through = msgs[len(msgs)-1].Info.ID
	}
	if through != "" {
		c.mu.Lock()
		if c.entries == nil {
			c.entries = make(map[string]*historyEntry)
		}
		if len(c.entries) >= historyCacheSize {
			for k := range c.entries {
				delete(c.entries, k)
				break
			}
		}
		c.entries[run.SessionID] = &historyEntry{through: through, msgs: out[:len(out):len(out)]}
		c.mu.Unlock()
	}
	return out, nil
}
