package engine

import (
	"context"
	"slices"
	"sync"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/store"
)

// The model's view of a transcript. It differs from what people see in
// four ways: a compaction replaces everything before its tail with its
// summary; tool outputs that were pruned are replaced by a marker (the
// transcript keeps them); a message whose stream broke and was retried is
// left out; and idle parts are agentd's bookkeeping, not conversation.

// prunedMarker replaces a pruned tool output in what the model sees.
const prunedMarker = "[output pruned to save context; run the tool again if you need it]"

// summaryQuestion introduces a compaction's summary to the model.
const summaryQuestion = "What did we do so far?"

// compaction is the latest completed compaction of a range of messages.
type compaction struct {
	userID  string // the user message holding the compaction part
	summary string // the summary's text
	// keepFrom is the position of the first message kept verbatim: the
	// compaction's tail, or what follows the compaction request.
	keepFrom int64
}

// keeps reports whether m is kept after the compaction.
func (c *compaction) keeps(m core.MessageWithParts) bool { return m.Info.Seq >= c.keepFrom }

// latestCompaction finds the newest compaction of msgs whose summary was
// completed; one cut off by a crash or a failure does not count.
func latestCompaction(msgs []core.MessageWithParts) *compaction {
	var c *compaction
	parts := map[string]*core.Part{}
	for i := range msgs {
		for j := range msgs[i].Parts {
			if msgs[i].Parts[j].Type == core.PartCompaction {
				parts[msgs[i].Info.ID] = &msgs[i].Parts[j]
			}
		}
	}
	seqs := make(map[string]int64, len(msgs))
	for _, m := range msgs {
		seqs[m.Info.ID] = m.Info.Seq
	}
	for _, m := range msgs {
		info := m.Info
		if !info.Summary || info.Completed == 0 || info.Error != nil {
			continue
		}
		cp, ok := parts[info.ParentID]
		if !ok {
			continue
		}
		text := ""
		for _, p := range m.Parts {
			if p.Type == core.PartText {
				text += p.Text
			}
		}
		keep := seqs[info.ParentID] + 1
		if tail, ok := seqs[cp.TailStart]; ok && cp.TailStart != "" {
			keep = tail
		}
		c = &compaction{userID: info.ParentID, summary: text, keepFrom: keep}
	}
	return c
}

// isCompactionMessage reports whether m is one half of a compaction: the
// user message asking for it or the summary.
func isCompactionMessage(m core.MessageWithParts) bool {
	if m.Info.Summary {
		return true
	}
	for _, p := range m.Parts {
		if p.Type == core.PartCompaction {
			return true
		}
	}
	return false
}

// isCompactionRequest reports whether a user message (read without its
// parts) asks for a compaction: such messages have the compaction agent.
func isCompactionRequest(m core.Message) bool { return m.Agent == compactionAgent }

// compactionAgent names the agent of compaction requests and summaries.
const compactionAgent = "compaction"

// reasoningSignature is the signature a provider gave a reasoning part
// ("" for none: such reasoning is not sent back).
func reasoningSignature(p core.Part) string {
	an, _ := p.Metadata["anthropic"].(map[string]any)
	sig, _ := an["signature"].(string)
	return sig
}

// compose is the model's view of msgs: when they hold a completed
// compaction, its summary and the messages from its tail on; otherwise
// all of them. It returns the id of the latest user message of run runID.
func compose(runID string, msgs []core.MessageWithParts, out []llm.Message) ([]llm.Message, string) {
	c := latestCompaction(msgs)
	if c == nil {
		return convert(runID, msgs, out)
	}
	out = append(out,
		llm.Message{Role: llm.RoleUser, Content: []llm.Content{{Type: llm.ContentText, Text: summaryQuestion}}},
		llm.Message{Role: llm.RoleAssistant, Content: []llm.Content{{Type: llm.ContentText, Text: c.summary}}})
	var keep []core.MessageWithParts
	for _, m := range msgs {
		if c.keeps(m) {
			keep = append(keep, m)
		}
	}
	return convert(runID, keep, out)
}

// convert appends the model's view of msgs to out (compactions apart) and
// returns the id of the latest user message of run runID among them.
func convert(runID string, msgs []core.MessageWithParts, out []llm.Message) ([]llm.Message, string) {
	parent := ""
	for _, m := range msgs {
		switch {
		case isCompactionMessage(m):
		case m.Info.Role == core.RoleUser:
			if m.Info.RunID == runID {
				parent = m.Info.ID
			}
			out = appendUser(out, m.Parts)
		case m.Info.Error.Ref() == core.RefStreamRetried:
			// An assistant message whose stream broke and was retried is
			// shown to people but not replayed to the model.
		default:
			out = appendAssistant(out, m.Parts)
		}
	}
	return out, parent
}

// appendUser appends a user message: its text and attached files.
func appendUser(out []llm.Message, parts []core.Part) []llm.Message {
	var c []llm.Content
	for i, p := range parts {
		switch p.Type {
		case core.PartText:
			c = append(c, llm.Content{Type: llm.ContentText, Text: p.Text})
		case core.PartFile:
			if fc, ok := fileContent(parts, i); ok {
				c = append(c, fc)
			}
		}
	}
	if len(c) > 0 {
		out = append(out, llm.Message{Role: llm.RoleUser, Content: c})
	}
	return out
}

// appendAssistant appends an assistant message (text, signed reasoning,
// tool calls) and the results of its calls as the user's next message.
func appendAssistant(out []llm.Message, parts []core.Part) []llm.Message {
	var asst, results []llm.Content
	for _, p := range parts {
		switch p.Type {
		case core.PartText:
			if p.Text != "" {
				asst = append(asst, llm.Content{Type: llm.ContentText, Text: p.Text})
			}
		case core.PartReasoning:
			if sig := reasoningSignature(p); sig != "" {
				asst = append(asst, llm.Content{Type: llm.ContentReasoning, Text: p.Text, Signature: sig})
			}
		case core.PartTool:
			asst = append(asst, llm.Content{Type: llm.ContentToolCall, CallID: p.CallID, Name: p.Tool, Input: p.State.Input})
			results = append(results, toolResult(p))
		}
	}
	if len(asst) > 0 {
		out = append(out, llm.Message{Role: llm.RoleAssistant, Content: asst})
	}
	if len(results) > 0 {
		out = append(out, llm.Message{Role: llm.RoleUser, Content: results})
	}
	return out
}

// toolResult is what the model reads of a call: its output (or the marker
// of a pruned one), its error, or, for a call that did not complete, an
// error saying so: every call must have a result before the model is
// called again.
func toolResult(p core.Part) llm.Content {
	switch p.State.Status {
	case core.ToolCompleted:
		text := p.State.Output
		if p.State.Time.Compacted != 0 {
			text = prunedMarker
		}
		return llm.Content{Type: llm.ContentToolResult, CallID: p.CallID, Text: text}
	case core.ToolError:
		return llm.Content{Type: llm.ContentToolResult, CallID: p.CallID, Text: p.State.Error, IsError: true}
	}
	return llm.Content{Type: llm.ContentToolResult, CallID: p.CallID, Text: "tool call did not complete", IsError: true}
}

// history turns the session's transcript into the model's conversation and
// returns the id of the user message the next step answers.
//
// Messages before the run's first user message cannot change while the run
// executes (but by this run's own compaction, which drops r.prefix), so
// they are read and converted once. The run's own part is read at its
// first step and then kept current from the run's own writes (own.go), so
// a step reads only the positions of the messages added since. A
// compaction drops the kept part with the prefix.
func (r *runner) history(ctx context.Context) ([]llm.Message, string, error) {
	kept, err := r.transcript(ctx)
	if err != nil {
		return nil, "", err
	}
	msgs, err := r.withoutQueued(ctx, kept)
	if err != nil {
		return nil, "", err
	}
	var out []llm.Message
	var parent string
	if latestCompaction(msgs) != nil {
		// Compacted during this run: the summary replaces the prefix.
		out, parent = compose(r.run.ID, msgs, nil)
	} else {
		if r.prefix == nil {
			var at int64 // the run's first message's position, when read
			if len(kept) > 0 && kept[0].Info.ID == r.run.UserMessageID {
				at = kept[0].Info.Seq
			}
			prefix, err := r.e.history.prefixAt(ctx, r.e.st, r.run, at)
			if err != nil {
				return nil, "", err
			}
			if r.e.cfg.CheckHistory {
				if err := r.checkPrefix(ctx, prefix); err != nil {
					return nil, "", err
				}
			}
			if prefix == nil {
				// Nothing before the run (a session's first prompt): nil
				// means "not read yet", and every step read it again.
				prefix = []llm.Message{}
			}
			r.prefix = prefix
		}
		out, parent = convert(r.run.ID, msgs, append([]llm.Message(nil), r.prefix...))
	}
	if parent == "" {
		parent = r.run.UserMessageID
	}
	return out, parent, nil
}

// withoutQueued leaves out of the run's part of the transcript the prompts
// queued for runs after it: they are those runs' to answer (the model
// would answer them here, and again there). An earlier run's messages
// stay (a run queued behind another starts with that run's last steps
// after its prompt), as do messages added without a run (no reply asked).
// msgs is not changed: the session's cache keeps them all, in place, for
// the runs that come after both. Only when a message of another run is
// there are the session's active runs read: those are the queued ones.
func (r *runner) withoutQueued(ctx context.Context, msgs []core.MessageWithParts) ([]core.MessageWithParts, error) {
	other := func(m core.MessageWithParts) bool { return m.Info.RunID != "" && m.Info.RunID != r.run.ID }
	if !slices.ContainsFunc(msgs, other) {
		return msgs, nil
	}
	active, err := r.e.st.ActiveRuns(ctx, r.run.SessionID)
	if err != nil {
		return nil, err
	}
	queued := map[string]bool{}
	for _, a := range active {
		queued[a.ID] = a.ID != r.run.ID
	}
	out := make([]core.MessageWithParts, 0, len(msgs))
	for _, m := range msgs {
		if !queued[m.Info.RunID] {
			out = append(out, m)
		}
	}
	return out, nil
}

// keepHistory hands the session's cache the view of the whole session
// through the run's last message, once the run has ended (only a run that
// succeeded is kept; an aborted or failed one closes parts it left open):
// r.own brought up to date with the run's last writes (own.go), which an
// ended run no longer changes. The session's next run then reads only its
// own messages, instead of the previous turn again.
func (r *runner) keepHistory(ctx context.Context) {
	if r.prefix == nil || latestCompaction(r.own) != nil {
		return
	}
	if ok, err := r.settleOwn(ctx); !ok || err != nil || len(r.own) == 0 || latestCompaction(r.own) != nil {
		return
	}
	kept := r.own
	out, _ := convert(r.run.ID, kept, append(make([]llm.Message, 0, len(r.prefix)+2*len(kept)), r.prefix...))
	last := kept[len(kept)-1].Info
	c := &r.e.history
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[r.run.SessionID]; ok && e.throughSeq >= last.Seq {
		return
	}
	c.put(r.run.SessionID, newEntry(last.ID, last.Seq, out))
}

// historyCacheBytes bounds the text the converted histories keep, rather
// than their number: a thousand busy sessions of a few turns each fit in a
// few megabytes, and one huge transcript cannot crowd out the others for
// long.
const historyCacheBytes = 32 << 20

// historyCache keeps, per session, the model's view of the transcript up to
// some message, so that each run reads only what was written since.
//
// It is safe because a run starts only when the session's earlier runs have
// ended (one executor per session), and an ended run's messages no longer
// change: everything before a run's first user message is final when the
// run starts. A compaction changes the view of earlier messages (pruned
// outputs, a summary): it drops the session's entry.
type historyCache struct {
	mu      sync.Mutex
	entries map[string]*historyEntry
	bytes   int // sum of the entries' sizes
}

type historyEntry struct {
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
		for _, c := range m.Content {
			n += 64 + len(c.Text) + len(c.Input) + len(c.Data)
		}
	}
	return n
}

// newEntry is the view msgs, through the message through at position
// seq; its capacity is cut so that no run appends into it.
func newEntry(through string, seq int64, msgs []llm.Message) *historyEntry {
	return &historyEntry{through: through, throughSeq: seq, msgs: msgs[:len(msgs):len(msgs)], size: sizeOf(msgs)}
}

// put keeps e for the session and evicts other entries, arbitrary ones,
// until the cache is within its budget. c.mu is held.
func (c *historyCache) put(sessionID string, e *historyEntry) {
	if c.entries == nil {
		c.entries = make(map[string]*historyEntry)
	}
	if old, ok := c.entries[sessionID]; ok {
		c.bytes -= old.size
	}
	c.entries[sessionID] = e
	c.bytes += e.size
	for k, v := range c.entries {
		if c.bytes <= historyCacheBytes {
			break
		}
		if v != e {
			delete(c.entries, k)
			c.bytes -= v.size
		}
	}
}

// drop forgets a session's view.
func (c *historyCache) drop(sessionID string) {
	c.mu.Lock()
	if e, ok := c.entries[sessionID]; ok {
		c.bytes -= e.size
		delete(c.entries, sessionID)
	}
	c.mu.Unlock()
}

// prefix returns the conversation before the run's first user message.
func (c *historyCache) prefix(ctx context.Context, st store.Reader, run core.Run) ([]llm.Message, error) {
	return c.prefixAt(ctx, st, run, 0)
}

// prefixAt is prefix given the position of the run's first user message
// (0: read it).
func (c *historyCache) prefixAt(ctx context.Context, st store.Reader, run core.Run, at int64) ([]llm.Message, error) {
	if at == 0 {
		first, err := st.Message(ctx, run.SessionID, run.UserMessageID)
		if err != nil {
			return nil, err
		}
		at = first.Info.Seq
	}
	c.mu.Lock()
	var base *historyEntry
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
	case base != nil && latestCompaction(msgs) == nil:
		// A copy, so that runs never share a backing array.
		out = make([]llm.Message, len(base.msgs), len(base.msgs)+len(msgs)+8)
		copy(out, base.msgs)
		out, _ = convert(run.ID, msgs, out)
		through, throughSeq = base.through, base.throughSeq
	case base != nil:
		// A compaction arrived since: build the view afresh.
		if msgs, err = st.Messages(ctx, run.SessionID, store.MessageQuery{Before: run.UserMessageID}); err != nil {
			return nil, err
		}
		out, _ = compose(run.ID, msgs, nil)
	default:
		out, _ = compose(run.ID, msgs, nil)
	}
	if len(msgs) > 0 {
		through, throughSeq = msgs[len(msgs)-1].Info.ID, msgs[len(msgs)-1].Info.Seq
	}
	if through != "" {
		c.mu.Lock()
		c.put(run.SessionID, newEntry(through, throughSeq, out))
		c.mu.Unlock()
	}
	return out, nil
}
