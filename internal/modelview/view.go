// Package modelview is the model's view of a session's transcript: the
// conversation agentd sends a provider, converted from the stored
// messages and parts, and the per-session cache that lets each run read
// only what was written since the last.
//
// The view differs from what people see in four ways: a compaction
// replaces everything before its tail with its summary; tool outputs that
// were pruned are replaced by a marker (the transcript keeps them); a
// message whose stream broke and was retried is left out; and idle parts
// are agentd's bookkeeping, not conversation.
package modelview

import (
	"fmt"
	"strings"

	"github.com/agentd/agentd/internal/attach"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/llm"
)

// prunedMarker replaces a pruned tool output in what the model sees.
const prunedMarker = "[output pruned to save context; run the tool again if you need it]"

// summaryQuestion introduces a compaction's summary to the model.
const summaryQuestion = "What did we do so far?"

// CompactionAgent names the agent of compaction requests and summaries.
const CompactionAgent = "compaction"

// Compaction is the latest completed compaction of a range of messages.
type Compaction struct {
	UserID  string // the user message holding the compaction part
	Summary string // the summary's text
	// KeepFrom is the position of the first message kept verbatim: the
	// compaction's tail, or what follows the compaction request.
	KeepFrom int64
	// Request and Answer are the record's messages the summary's two
	// turns stand for: the request (nil if it is not among the messages
	// read) and the summary.
	Request, Answer *core.Message
}

// Keeps reports whether m is kept after the compaction.
func (c *Compaction) Keeps(m core.MessageWithParts) bool { return m.Info.Seq >= c.KeepFrom }

// Kept returns, in a new slice, the messages of msgs kept after the
// compaction.
func (c *Compaction) Kept(msgs []core.MessageWithParts) []core.MessageWithParts {
	var keep []core.MessageWithParts
	for _, m := range msgs {
		if c.Keeps(m) {
			keep = append(keep, m)
		}
	}
	return keep
}

// Latest finds the newest compaction of msgs whose summary was completed;
// one cut off by a crash or a failure does not count. It returns nil when
// there is none.
func Latest(msgs []core.MessageWithParts) *Compaction {
	var c *Compaction
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
		c = &Compaction{UserID: info.ParentID, Summary: text, KeepFrom: keep, Answer: &info}
	}
	for i := range msgs {
		if c != nil && msgs[i].Info.ID == c.UserID {
			req := msgs[i].Info
			c.Request = &req
		}
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

// IsCompactionRequest reports whether a user message (read without its
// parts) asks for a compaction: such messages have the compaction agent.
func IsCompactionRequest(m core.Message) bool { return m.Agent == CompactionAgent }

// Compose is the model's view of msgs: when they hold a completed
// compaction, its summary and the messages from its tail on; otherwise
// all of them. It returns the id of the latest user message of run runID.
func Compose(runID string, msgs []core.MessageWithParts, out []llm.Message) ([]llm.Message, string) {
	return ComposeAfter(Latest(msgs), runID, msgs, out)
}

// ComposeAfter is Compose for a caller that has looked up msgs' latest
// compaction already: c is Latest(msgs).
func ComposeAfter(c *Compaction, runID string, msgs []core.MessageWithParts, out []llm.Message) ([]llm.Message, string) {
	if c == nil {
		return Convert(runID, msgs, out)
	}
	out = append(out,
		llm.Message{Role: llm.RoleUser, Content: []llm.Content{{Type: llm.ContentText, Text: summaryQuestion}}, From: c.Request},
		llm.Message{Role: llm.RoleAssistant, Content: []llm.Content{{Type: llm.ContentText, Text: c.Summary}}, From: c.Answer})
	return Convert(runID, c.Kept(msgs), out)
}

// Convert appends the model's view of msgs to out (compactions apart) and
// returns the id of the latest user message of run runID among them.
func Convert(runID string, msgs []core.MessageWithParts, out []llm.Message) ([]llm.Message, string) {
	parent := ""
	for _, m := range msgs {
		switch {
		case isCompactionMessage(m):
		case m.Info.Role == core.RoleUser:
			if m.Info.RunID == runID {
				parent = m.Info.ID
			}
			out = appendUser(out, m)
		case m.Info.Error.Ref() == core.RefStreamRetried:
			// An assistant message whose stream broke and was retried is
			// shown to people but not replayed to the model.
		default:
			out = appendAssistant(out, m)
		}
	}
	return out, parent
}

// appendUser appends a user message: its text (but ignored text, as
// opencode leaves it out) and attached files. Each
// turn and block names the record's message and part it came from (the
// message copied: a kept view must not hold the transcript's parts).
func appendUser(out []llm.Message, m core.MessageWithParts) []llm.Message {
	var c []llm.Content
	for i, p := range m.Parts {
		switch p.Type {
		case core.PartText:
			if !p.Ignored {
				c = append(c, llm.Content{Type: llm.ContentText, Text: p.Text, PartID: p.ID, Part: textInfo(p)})
			}
		case core.PartFile:
			if fc, ok := fileContent(m.Parts, i); ok {
				fc.PartID = p.ID
				c = append(c, fc)
			}
		}
	}
	if len(c) > 0 {
		info := m.Info
		out = append(out, llm.Message{Role: llm.RoleUser, Content: c, From: &info})
	}
	return out
}

// appendAssistant appends an assistant message (text, signed reasoning,
// tool calls) and the results of its calls as the user's next message.
func appendAssistant(out []llm.Message, m core.MessageWithParts) []llm.Message {
	var asst, results []llm.Content
	for _, p := range m.Parts {
		switch p.Type {
		case core.PartText:
			if p.Text != "" {
				asst = append(asst, llm.Content{Type: llm.ContentText, Text: p.Text, PartID: p.ID, Part: textInfo(p)})
			}
		case core.PartReasoning:
			if sig := core.ReasoningSignature(p.Metadata); sig != "" {
				asst = append(asst, llm.Content{Type: llm.ContentReasoning, Text: p.Text, Signature: sig, PartID: p.ID,
					Part: textInfo(p)})
			}
		case core.PartTool:
			asst = append(asst, llm.Content{Type: llm.ContentToolCall, CallID: p.CallID, Name: p.Tool, Input: p.State.Input, PartID: p.ID,
				Part: &llm.PartInfo{Title: p.State.Title, Metadata: orNil(p.State.Metadata), Time: p.State.Time}})
			r := toolResult(p)
			r.PartID = p.ID
			results = append(results, r)
		}
	}
	info := m.Info
	if len(asst) > 0 {
		out = append(out, llm.Message{Role: llm.RoleAssistant, Content: asst, From: &info})
	}
	if len(results) > 0 {
		out = append(out, llm.Message{Role: llm.RoleUser, Content: results, From: &info})
	}
	return out
}

// textInfo is what a text or reasoning part holds beyond its text.
func textInfo(p core.Part) *llm.PartInfo {
	return &llm.PartInfo{Synthetic: p.Synthetic, Metadata: orNil(p.Metadata), Time: p.Time}
}

// orNil is metadata with an empty map as none: a read gives {} where the
// run that wrote the part kept nil, and the view is the same either way.
func orNil(m map[string]any) map[string]any {
	if len(m) == 0 {
		return nil
	}
	return m
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

// fileContent is what the model reads of the file part parts[i] of a user
// message. A picture or a PDF is itself an image or a document. What a
// text file or a directory holds is in the synthetic text parts written
// before it when the prompt was admitted (package attach), so its part
// adds nothing; a message written before agentd read attachments has no
// such parts: a text file it sent as data is given whole, another file is
// named (never its data).
func fileContent(parts []core.Part, i int) (llm.Content, bool) {
	p := parts[i]
	if c, ok := llm.Media(p.Mime, p.URL, p.Filename); ok {
		return c, true
	}
	for _, q := range parts {
		if q.Type == core.PartText && q.Synthetic {
			return llm.Content{}, false
		}
	}
	return llm.Content{Type: llm.ContentText, Text: legacyAttachment(p)}, true
}

// legacyAttachment is how a file part of an old message reads.
func legacyAttachment(p core.Part) string {
	if !strings.HasPrefix(p.URL, "data:") {
		return fmt.Sprintf("[attached file %s (%s): %s]", p.Filename, p.Mime, p.URL)
	}
	if text, ok := attach.DataText(p.URL); ok && attach.Textual(p.Mime) {
		return fmt.Sprintf("<file name=%q mime=%q>\n%s\n</file>", p.Filename, p.Mime, text)
	}
	return fmt.Sprintf("[attached file %s (%s)]", p.Filename, p.Mime)
}
