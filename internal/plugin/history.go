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
// the exact content the engine composed (signatures, attachments).

// ocMessage is a message as opencode's plugins see it.
type ocMessage struct {
	Info  ocInfo   `json:"info"`
	Parts []ocPart `json:"parts"`
}

type ocInfo struct {
	ID        string `json:"id"`
	SessionID string `json:"sessionID"`
	Role      string `json:"role"`
}

type ocPart struct {
	ID        string         `json:"id"`
	SessionID string         `json:"sessionID"`
	MessageID string         `json:"messageID"`
	Type      string         `json:"type"`
	Text      string         `json:"text,omitempty"`
	CallID    string         `json:"callID,omitempty"`
	Tool      string         `json:"tool,omitempty"`
	State     *ocState       `json:"state,omitempty"`
	Mime      string         `json:"mime,omitempty"`
	URL       string         `json:"url,omitempty"`
	Filename  string         `json:"filename,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

type ocState struct {
	Status string          `json:"status"`
	Input  json.RawMessage `json:"input"`
	Output string          `json:"output,omitempty"`
	Error  string          `json:"error,omitempty"`
	Title  string          `json:"title,omitempty"`
}

// toOpencode turns the request's messages into opencode's: a tool's
// result goes into its call's part (opencode keeps both in the
// assistant's message), so a user message of only results is no message
// of its own. spans[i] is the range of msgs that message i came from.
func toOpencode(sessionID string, msgs []llm.Message) (out []ocMessage, spans [][2]int) {
	calls := map[string]*ocState{}
	for i, m := range msgs {
		if m.Role == llm.RoleUser && onlyResults(m) && len(out) > 0 {
			for _, c := range m.Content {
				if st := calls[c.CallID]; st != nil {
					st.Status, st.Output = "completed", c.Text
					if c.IsError {
						st.Status, st.Output, st.Error = "error", "", c.Text
					}
				}
			}
			spans[len(spans)-1][1] = i + 1
			continue
		}
		id := fmt.Sprintf("msg_h%06d", i)
		om := ocMessage{Info: ocInfo{ID: id, SessionID: sessionID, Role: m.Role}, Parts: []ocPart{}}
		for j, c := range m.Content {
			p := ocPart{ID: fmt.Sprintf("prt_h%06d_%03d", i, j), SessionID: sessionID, MessageID: id, Type: c.Type, Text: c.Text}
			switch c.Type {
			case llm.ContentToolCall:
				p.Type, p.CallID, p.Tool, p.Text = "tool", c.CallID, c.Name, ""
				p.State = &ocState{Status: "pending", Input: orObject(c.Input)}
				calls[c.CallID] = p.State
			case llm.ContentReasoning:
				if c.Signature != "" {
					p.Metadata = map[string]any{"anthropic": map[string]any{"signature": c.Signature}}
				}
			case llm.ContentImage, llm.ContentDocument:
				p.Type, p.Text, p.Mime, p.Filename, p.URL = "file", "", c.MediaType, c.Filename, c.URL
				if c.Data != "" {
					p.URL = "data:" + c.MediaType + ";base64," + c.Data
				}
			}
			om.Parts = append(om.Parts, p)
		}
		out = append(out, om)
		spans = append(spans, [2]int{i, i + 1})
	}
	return out, spans
}

func onlyResults(m llm.Message) bool {
	for _, c := range m.Content {
		if c.Type != llm.ContentToolResult {
			return false
		}
	}
	return len(m.Content) > 0
}

func orObject(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("{}")
	}
	return b
}

// fromOpencode turns a message a plugin changed back into the request's:
// an assistant's finished tool parts add a user message of their results.
func fromOpencode(m ocMessage) []llm.Message {
	msg := llm.Message{Role: m.Info.Role}
	var results []llm.Content
	for _, p := range m.Parts {
		switch p.Type {
		case "text", llm.ContentReasoning:
			c := llm.Content{Type: p.Type, Text: p.Text}
			if sig, ok := p.Metadata["anthropic"].(map[string]any); ok && p.Type == llm.ContentReasoning {
				c.Signature, _ = sig["signature"].(string)
			}
			msg.Content = append(msg.Content, c)
		case "file":
			c := llm.Content{Type: llm.ContentDocument, MediaType: p.Mime, Filename: p.Filename, URL: p.URL}
			if strings.HasPrefix(p.Mime, "image/") {
				c.Type = llm.ContentImage
			}
			if rest, ok := strings.CutPrefix(p.URL, "data:"); ok {
				if _, data, ok := strings.Cut(rest, ";base64,"); ok {
					c.URL, c.Data = "", data
				}
			}
			msg.Content = append(msg.Content, c)
		case "tool":
			if p.State == nil {
				continue
			}
			msg.Content = append(msg.Content, llm.Content{Type: llm.ContentToolCall, CallID: p.CallID, Name: p.Tool, Input: orObject(p.State.Input)})
			switch p.State.Status {
			case "completed":
				results = append(results, llm.Content{Type: llm.ContentToolResult, CallID: p.CallID, Name: p.Tool, Text: p.State.Output})
			case "error":
				results = append(results, llm.Content{Type: llm.ContentToolResult, CallID: p.CallID, Name: p.Tool, Text: p.State.Error, IsError: true})
			}
		}
	}
	out := []llm.Message{}
	if len(msg.Content) > 0 {
		out = append(out, msg)
	}
	if len(results) > 0 {
		out = append(out, llm.Message{Role: llm.RoleUser, Content: results})
	}
	return out
}

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
	msgs, spans := toOpencode(in.SessionID, req.Messages)
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
			next = append(next, fromOpencode(*m.Message)...)
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
