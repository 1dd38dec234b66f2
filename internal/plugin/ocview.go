package plugin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/llm"
)

// The history as experimental.chat.messages.transform gets it: opencode's
// {info, parts} messages, with the record's ids and message fields where
// the request's turn came from a record (llm.Message.From,
// llm.Content.PartID). A plugin that matches the history with the
// session's messages (GET /session/{id}/message) by id, as
// @tarquinen/opencode-dcp's compress ranges do, finds them. A turn the
// server made up gets an id that says so (msg_agentd_synthetic_…), as do
// the step-start parts opencode's assistant messages open with.

// ocMessage is a message as opencode's plugins see it; its info is the
// record's message in opencode's shape.
type ocMessage struct {
	Info  json.RawMessage `json:"info"`
	Parts []ocPart        `json:"parts"`
}

// ocHead is what the server reads of the info of a message a plugin
// returns.
type ocHead struct {
	ID   string `json:"id"`
	Role string `json:"role"`
}

// ocPart is a part in opencode's shape: text and reasoning with their
// record's time, synthetic flag and metadata, a tool call with its
// state's title, metadata and time.
type ocPart struct {
	ID        string         `json:"id"`
	SessionID string         `json:"sessionID"`
	MessageID string         `json:"messageID"`
	Type      string         `json:"type"`
	Text      string         `json:"text,omitempty"`
	Synthetic bool           `json:"synthetic,omitempty"`
	CallID    string         `json:"callID,omitempty"`
	Tool      string         `json:"tool,omitempty"`
	State     *ocState       `json:"state,omitempty"`
	Mime      string         `json:"mime,omitempty"`
	URL       string         `json:"url,omitempty"`
	Filename  string         `json:"filename,omitempty"`
	Time      *core.PartTime `json:"time,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// ocState is a tool part's state. Title and Metadata are pointers and an
// interface so that a finished call carries them even empty, as
// opencode's completed state does.
type ocState struct {
	Status   string          `json:"status"`
	Input    json.RawMessage `json:"input"`
	Output   string          `json:"output,omitempty"`
	Error    string          `json:"error,omitempty"`
	Title    *string         `json:"title,omitempty"`
	Metadata any             `json:"metadata,omitempty"`
	Time     *core.PartTime  `json:"time,omitempty"`
}

// ocHistory is a request's history in opencode's shape: spans[i] is the
// range of the request's messages that msgs[i] came from, and parts finds
// the blocks each part was made from.
type ocHistory struct {
	msgs  []ocMessage
	spans [][2]int
	parts map[string]*origin
}

// origin is where a part sent to the host is (msgs[msg].Parts[part]) and
// the request's blocks it was made from: a call and its result for a tool
// part, the block itself otherwise.
type origin struct {
	msg, part    int
	call, result *llm.Content
}

// syntheticStep is the id prefix of the step-start part of an assistant
// message; syntheticID that of a made-up message or part.
const (
	syntheticStep = "prt_agentd_step_"
	syntheticID   = "agentd_synthetic_"
)

// toOpencode turns the request's messages into opencode's: a tool's
// result goes into its call's part (opencode keeps both in the
// assistant's message), so a user message of only results is no message
// of its own.
func toOpencode(sessionID string, msgs []llm.Message) *ocHistory {
	h := &ocHistory{parts: map[string]*origin{}}
	calls := map[string]*origin{}
	var user *core.Message // the latest user message of the record
	var created int64
	for i := range msgs {
		m := &msgs[i]
		if m.Role == llm.RoleUser && onlyResults(*m) && len(h.msgs) > 0 {
			for j := range m.Content {
				c := &m.Content[j]
				if o := calls[c.CallID]; o != nil {
					o.result = c
					finish(h.msgs[o.msg].Parts[o.part].State, c, o.call.Part)
				}
			}
			h.spans[len(h.spans)-1][1] = i + 1
			continue
		}
		info := m.From
		if info == nil || info.Role != m.Role {
			info = synthetic(sessionID, i, m.Role, created, user)
		}
		created = info.Created
		if info.Role == core.RoleUser {
			user = info
		}
		h.add(sessionID, i, m, info, calls)
	}
	return h
}

// synthetic is the info of a turn the server made up (at position i): it
// borrows the time of the turn before it and the agent and model of the
// latest user message, which plugins read off the last user message.
func synthetic(sessionID string, i int, role string, created int64, user *core.Message) *core.Message {
	info := &core.Message{ID: fmt.Sprintf("msg_%s%06d", syntheticID, i), SessionID: sessionID, Role: role, Created: created}
	if user != nil {
		info.Agent, info.Model = user.Agent, user.Model
	}
	return info
}

// add appends request message i, whose info is info, as an opencode
// message.
func (h *ocHistory) add(sessionID string, i int, m *llm.Message, info *core.Message, calls map[string]*origin) {
	raw, _ := json.Marshal(info)
	at := len(h.msgs)
	om := ocMessage{Info: raw, Parts: make([]ocPart, 0, len(m.Content)+1)}
	if m.Role == llm.RoleAssistant {
		om.Parts = append(om.Parts, ocPart{ID: syntheticStep + info.ID, SessionID: sessionID, MessageID: info.ID, Type: "step-start"})
	}
	for j := range m.Content {
		c := &m.Content[j]
		id := c.PartID
		if id == "" || h.parts[id] != nil {
			id = fmt.Sprintf("prt_%s%06d_%03d", syntheticID, i, j)
		}
		o := &origin{msg: at, part: len(om.Parts), call: c}
		h.parts[id] = o
		p := ocPart{ID: id, SessionID: sessionID, MessageID: info.ID, Type: c.Type, Text: c.Text}
		if r := c.Part; r != nil && c.Type != llm.ContentToolCall {
			p.Synthetic, p.Metadata = r.Synthetic, r.Metadata
			if r.Time.Start != 0 {
				p.Time = &r.Time
			}
		}
		switch c.Type {
		case llm.ContentToolCall:
			p.Type, p.CallID, p.Tool, p.Text = "tool", c.CallID, c.Name, ""
			p.State = &ocState{Status: "pending", Input: orObject(c.Input)}
			calls[c.CallID] = o
		case llm.ContentReasoning:
			if c.Signature != "" && p.Metadata == nil {
				p.Metadata = core.ReasoningMetadata(c.Signature)
			}
		case llm.ContentImage, llm.ContentDocument:
			p.Type, p.Text, p.Mime, p.Filename, p.URL = "file", "", c.MediaType, c.Filename, c.URL
			if c.Data != "" {
				p.URL = "data:" + c.MediaType + ";base64," + c.Data
			}
		}
		om.Parts = append(om.Parts, p)
	}
	h.msgs = append(h.msgs, om)
	h.spans = append(h.spans, [2]int{i, i + 1})
}

// finish sets a tool part's state from its call's result and what the
// record's part held (r, nil for a call the server made up): opencode's
// completed or error state, with the record's title, metadata and time.
func finish(st *ocState, c *llm.Content, r *llm.PartInfo) {
	st.Status, st.Output = "completed", c.Text
	if c.IsError {
		st.Status, st.Output, st.Error = "error", "", c.Text
	}
	if r == nil {
		return
	}
	if r.Metadata != nil {
		st.Metadata = r.Metadata
	}
	if !c.IsError {
		title := r.Title
		st.Title = &title
		if st.Metadata == nil {
			st.Metadata = map[string]any{}
		}
	}
	if r.Time.Start != 0 {
		st.Time = &r.Time
	}
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

// unchanged finds the origin of a part a plugin returned as it was sent.
func (h *ocHistory) unchanged(p ocPart) *origin {
	o := h.parts[p.ID]
	if o == nil {
		return nil
	}
	sent, err1 := json.Marshal(h.msgs[o.msg].Parts[o.part])
	got, err2 := json.Marshal(p)
	if err1 != nil || err2 != nil || !bytes.Equal(sent, got) {
		return nil
	}
	return o
}

// fromOpencode turns a message a plugin changed back into the request's:
// an assistant's finished tool parts add a user message of their results.
// A part the plugin left as it was sent is the blocks it was made from.
func (h *ocHistory) fromOpencode(m ocMessage) []llm.Message {
	var head ocHead
	_ = json.Unmarshal(m.Info, &head)
	msg := llm.Message{Role: head.Role}
	var results []llm.Content
	for _, p := range m.Parts {
		if o := h.unchanged(p); o != nil {
			msg.Content = append(msg.Content, *o.call)
			if o.result != nil {
				results = append(results, *o.result)
			}
			continue
		}
		c, r, ok := fromPart(p)
		if o := h.parts[p.ID]; o != nil {
			c.PartID, r.PartID = o.call.PartID, o.call.PartID
		}
		if ok {
			msg.Content = append(msg.Content, c)
		}
		if r.Type != "" {
			results = append(results, r)
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

// fromPart is the request's block a part a plugin changed or added
// stands for (ok false: none), and for a finished tool part its result.
func fromPart(p ocPart) (c, result llm.Content, ok bool) {
	switch p.Type {
	case "text", llm.ContentReasoning:
		c = llm.Content{Type: p.Type, Text: p.Text}
		if p.Type == llm.ContentReasoning {
			c.Signature = core.ReasoningSignature(p.Metadata)
		}
		return c, result, true
	case "file":
		c = llm.Content{Type: llm.ContentDocument, MediaType: p.Mime, Filename: p.Filename, URL: p.URL}
		if strings.HasPrefix(p.Mime, "image/") {
			c.Type = llm.ContentImage
		}
		if rest, ok := strings.CutPrefix(p.URL, "data:"); ok {
			if _, data, ok := strings.Cut(rest, ";base64,"); ok {
				c.URL, c.Data = "", data
			}
		}
		return c, result, true
	case "tool":
		if p.State == nil {
			return c, result, false
		}
		c = llm.Content{Type: llm.ContentToolCall, CallID: p.CallID, Name: p.Tool, Input: orObject(p.State.Input)}
		switch p.State.Status {
		case "completed":
			result = llm.Content{Type: llm.ContentToolResult, CallID: p.CallID, Name: p.Tool, Text: p.State.Output}
		case "error":
			result = llm.Content{Type: llm.ContentToolResult, CallID: p.CallID, Name: p.Tool, Text: p.State.Error, IsError: true}
		}
		return c, result, true
	}
	return c, result, false
}
