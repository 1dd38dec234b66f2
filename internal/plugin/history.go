package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/agentd/agentd/internal/llm"
)

// experimental.chat.messages.transform gets the whole history of a step as
// opencode's {info, parts} messages, and may change any of it. The history
// is large and grows by a few messages a step, so it goes to the host as a
// change: the host keeps each session's last history, the server the
// fingerprints of what it sent, and a step sends how many leading
// messages are unchanged and the rest. The host answers with the changed
// messages whole and the others by index, so an unchanged message keeps
// the exact content the engine composed (signatures, attachments); in a
// changed message, so does each part the plugin left as it was (found by
// its id). Messages and parts carry the record's ids (ocview.go), which
// keeps each message's JSON, and so the change sent, the same from step
// to step.

// transformed is the host's answer: per message of the output, the index
// of an unchanged input message, or the changed message whole.
type transformed struct {
	Messages []struct {
		Same    *int       `json:"same"`
		Message *ocMessage `json:"message"`
	} `json:"messages"`
}

// maxKept bounds the sessions whose history the server remembers sending
// (the host keeps as many).
const maxKept = 64

// transformMessages runs experimental.chat.messages.transform on the
// request's history, sending the host what changed since the session's
// last step.
func (h *Host) transformMessages(ctx context.Context, p *proc, in StepInput, req *llm.Request) error {
	oc := toOpencode(in.SessionID, req.Messages)
	msgs, spans := oc.msgs, oc.spans
	prints := make([]uint64, len(msgs))
	for i := range msgs {
		b, _ := json.Marshal(msgs[i])
		f := fnv.New64a()
		f.Write(b)
		prints[i] = f.Sum64()
	}
	p.mu.Lock()
	sent := p.sent[in.SessionID]
	p.mu.Unlock()
	keep := 0
	for keep < len(sent) && keep < len(prints) && sent[keep] == prints[keep] {
		keep++
	}
	var out transformed
	err := h.transformCall(ctx, p, in, keep, msgs, &out)
	if err != nil && strings.Contains(err.Error(), errNotKept) && keep > 0 {
		keep = 0 // the host restarted or let the session go: all of it
		err = h.transformCall(ctx, p, in, keep, msgs, &out)
	}
	if err != nil {
		return err
	}
	p.mu.Lock()
	if len(p.sent) >= maxKept && p.sent[in.SessionID] == nil {
		clear(p.sent) // the host evicts its oldest; starting over costs one whole send each
	}
	p.sent[in.SessionID] = prints
	p.mu.Unlock()
	var next []llm.Message
	for _, m := range out.Messages {
		switch {
		case m.Same != nil && *m.Same >= 0 && *m.Same < len(spans):
			s := spans[*m.Same]
			next = append(next, req.Messages[s[0]:s[1]]...)
		case m.Message != nil:
			next = append(next, oc.fromOpencode(*m.Message)...)
		}
	}
	req.Messages = next
	return nil
}

// errNotKept is the host's refusal of a change to a history it does not
// hold.
const errNotKept = "history not kept"

func (h *Host) transformCall(ctx context.Context, p *proc, in StepInput, keep int, msgs []ocMessage, out *transformed) error {
	cctx, cancel := context.WithTimeoutCause(ctx, h.opts.Timeout,
		fmt.Errorf("no answer within %s (agentd.plugins.timeout)", h.opts.Timeout))
	defer cancel()
	h.historySent.Add(int64(len(msgs) - keep))
	err := p.conn.call(cctx, "transform", map[string]any{"directory": in.Directory, "sessionID": in.SessionID,
		"keep": keep, "add": msgs[keep:]}, out)
	if err != nil {
		h.timedOut(p, err)
		return &HookError{Message: "plugin hook experimental.chat.messages.transform: " + err.Error()}
	}
	return nil
}
