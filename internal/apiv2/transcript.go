package apiv2

import (
	"encoding/json"
	"strings"

	"github.com/agentd/agentd/internal/core"
)

// The transcript in opencode 2's shape (SessionMessage): each stored
// message becomes one entry (a user prompt, a step of the assistant, a
// compaction), and the record adds two of opencode 2's own: the idle
// entry that closes every run with its outcome (agentd's idle part), and
// the synthetic note a run resumed after a restart continues from.

// timeCreated is an entry's time.
type timeCreated struct {
	Created   int64 `json:"created"`
	Completed int64 `json:"completed,omitempty"`
}

type userEntry struct {
	ID     string            `json:"id"`
	Type   string            `json:"type"`
	Time   timeCreated       `json:"time"`
	Text   string            `json:"text"`
	Files  []fileAttachment  `json:"files,omitempty"`
	Agents []agentAttachment `json:"agents,omitempty"`
}

type assistantEntry struct {
	ID       string        `json:"id"`
	Type     string        `json:"type"`
	Time     timeCreated   `json:"time"`
	Agent    string        `json:"agent"`
	Model    modelRef      `json:"model"`
	Content  []any         `json:"content"`
	Snapshot *snapshotJSON `json:"snapshot,omitempty"`
	Finish   string        `json:"finish,omitempty"`
	Cost     float64       `json:"cost,omitempty"`
	Tokens   *core.Tokens  `json:"tokens,omitempty"`
	Error    *unknownError `json:"error,omitempty"`
}

type snapshotJSON struct {
	Start string   `json:"start,omitempty"`
	End   string   `json:"end,omitempty"`
	Files []string `json:"files,omitempty"`
}

// idleEntry is opencode 2's Session.Message.Idle: the run that ended
// here, and how. agentd's record of it (run id, reason, error) is in its
// metadata.
type idleEntry struct {
	ID       string         `json:"id"`
	Type     string         `json:"type"`
	Time     timeCreated    `json:"time"`
	Outcome  core.RunState  `json:"outcome"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

type syntheticEntry struct {
	ID        string      `json:"id"`
	Type      string      `json:"type"`
	Time      timeCreated `json:"time"`
	SessionID string      `json:"sessionID"`
	Text      string      `json:"text"`
}

type compactionEntry struct {
	ID      string      `json:"id"`
	Type    string      `json:"type"`
	Time    timeCreated `json:"time"`
	Reason  string      `json:"reason"`
	Summary string      `json:"summary"`
	Recent  string      `json:"recent"`
}

// resumeNote is the note opencode 2 writes when a run cut off by a
// restart resumes.
const resumeNote = "The server restarted while you were working. Continue from where you left off without repeating completed work."

// cutOffByRestart reports whether an assistant message was cut off by a
// restart (or its node's death): the engine's recovery marks it so.
func cutOffByRestart(m core.Message) bool {
	return m.Error != nil && m.Error.Name == core.ErrNameAborted &&
		(m.Error.Data.Message == "cut off by a server restart" || m.Error.Data.Message == "cut off: the node running it stopped")
}

// resumeID is the id of the note that follows a message a restart cut
// off; idleID the id of a run's idle entry (from its idle part's).
func resumeID(cutOff string) string { return cutOff + "_resumed" }
func idleID(partID string) string {
	return core.PrefixMessage + "_" + strings.TrimPrefix(partID, core.PrefixPart+"_")
}

// entries turns stored messages (oldest first) into opencode 2's
// transcript entries.
func entries(msgs []core.MessageWithParts) []any {
	out := make([]any, 0, len(msgs))
	for i, m := range msgs {
		if m.Info.Role == core.RoleUser {
			out = append(out, userOf(m, msgs[i+1:]))
			continue
		}
		if m.Info.Summary {
			continue // the compaction entry carries it
		}
		out = append(out, assistantOf(m))
		var idle *core.Part
		for j := range m.Parts {
			if m.Parts[j].Type == core.PartIdle {
				idle = &m.Parts[j]
			}
		}
		if cutOffByRestart(m.Info) && idle == nil {
			out = append(out, syntheticEntry{ID: resumeID(m.Info.ID), Type: "synthetic", SessionID: m.Info.SessionID, Text: resumeNote,
				Time: timeCreated{Created: m.Info.Completed}})
		}
		if idle != nil {
			out = append(out, idleOf(*idle))
		}
	}
	return out
}

func idleOf(p core.Part) idleEntry {
	meta := map[string]any{"runID": p.RunID}
	if p.Reason != "" {
		meta["reason"] = p.Reason
	}
	if p.Error != nil {
		meta["error"] = p.Error
	}
	return idleEntry{ID: idleID(p.ID), Type: "idle", Time: timeCreated{Created: p.Time.Start}, Outcome: p.Outcome,
		Metadata: map[string]any{"agentd": meta}}
}

// userOf is a user message's entry: its prompt, or the compaction it asks
// for (with the summary the next summary message holds).
func userOf(m core.MessageWithParts, later []core.MessageWithParts) any {
	u := userEntry{ID: m.Info.ID, Type: "user", Time: timeCreated{Created: m.Info.Created}}
	var texts []string
	for _, p := range m.Parts {
		switch {
		case p.Type == core.PartCompaction:
			reason := "manual"
			if p.Auto {
				reason = "auto"
			}
			c := compactionEntry{ID: m.Info.ID, Type: "compaction", Time: u.Time, Reason: reason}
			for _, n := range later {
				if n.Info.Role == core.RoleAssistant && n.Info.Summary {
					c.Summary = textOf(n.Parts)
					break
				}
				if n.Info.Role == core.RoleUser {
					break
				}
			}
			return c
		case p.Type == core.PartText && strings.HasPrefix(p.Text, agentPrompt) && p.Synthetic:
			u.Agents = append(u.Agents, agentAttachment{Name: strings.TrimPrefix(p.Text, agentPrompt)})
		case p.Type == core.PartText && !p.Synthetic:
			texts = append(texts, p.Text)
		case p.Type == core.PartFile:
			u.Files = append(u.Files, fileAttachment{URI: p.URL, Mime: p.Mime, Name: p.Filename})
		}
	}
	u.Text = strings.Join(texts, "\n")
	return u
}

// textOf joins a message's text.
func textOf(parts []core.Part) string {
	var sb strings.Builder
	for _, p := range parts {
		if p.Type == core.PartText && !p.Synthetic {
			sb.WriteString(p.Text)
		}
	}
	return sb.String()
}

// assistantOf is one step of the assistant: its text, reasoning and tool
// calls, the snapshots around it and what it cost.
func assistantOf(m core.MessageWithParts) assistantEntry {
	in := m.Info
	a := assistantEntry{ID: in.ID, Type: "assistant", Time: timeCreated{Created: in.Created, Completed: in.Completed}, Agent: in.Agent,
		Model: modelRef{ID: in.ModelID, ProviderID: in.ProviderID}, Content: []any{}, Finish: in.Finish, Cost: in.Cost,
		Error: unknownOf(in.Error)}
	if in.Agent == "" {
		a.Agent = in.Mode
	}
	if in.Tokens != (core.Tokens{}) {
		t := in.Tokens
		a.Tokens = &t
	}
	snap := snapshotJSON{}
	for _, p := range m.Parts {
		switch p.Type {
		case core.PartText:
			if !p.Synthetic {
				a.Content = append(a.Content, textContent{Type: "text", ID: p.ID, Text: p.Text})
			}
		case core.PartReasoning:
			a.Content = append(a.Content, reasoningContent{Type: "reasoning", ID: p.ID, Text: p.Text,
				Time: &timeCreated{Created: p.Time.Start, Completed: p.Time.End}})
		case core.PartTool:
			a.Content = append(a.Content, toolOf(p))
		case core.PartStepStart:
			snap.Start = p.Snapshot
		case core.PartStepFinish:
			snap.End = p.Snapshot
		case core.PartPatch:
			snap.Files = append(snap.Files, p.Files...)
		}
	}
	if snap.Start != "" || snap.End != "" || len(snap.Files) > 0 {
		a.Snapshot = &snap
	}
	return a
}

type textContent struct {
	Type string `json:"type"`
	ID   string `json:"id"`
	Text string `json:"text"`
}

type reasoningContent struct {
	Type string       `json:"type"`
	ID   string       `json:"id"`
	Text string       `json:"text"`
	Time *timeCreated `json:"time,omitempty"`
}

type toolContent struct {
	Type     string       `json:"type"`
	ID       string       `json:"id"`
	Name     string       `json:"name"`
	Provider toolProvider `json:"provider"`
	State    any          `json:"state"`
	Time     toolTime     `json:"time"`
}

// toolProvider says that agentd ran the call (not the provider).
type toolProvider struct {
	Executed bool `json:"executed"`
}

type toolTime struct {
	Created   int64 `json:"created"`
	Ran       int64 `json:"ran,omitempty"`
	Completed int64 `json:"completed,omitempty"`
}

// toolText is opencode 2's ToolTextContent.
type toolText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func toolOf(p core.Part) toolContent {
	s := p.State
	t := toolContent{Type: "tool", ID: p.CallID, Name: p.Tool, Time: toolTime{Created: s.Time.Start, Ran: s.Time.Start, Completed: s.Time.End}}
	input := json.RawMessage(core.StoredInput(s.Input))
	structured := s.Metadata
	if structured == nil {
		structured = map[string]any{}
	}
	switch s.Status {
	case core.ToolPending:
		t.Time.Ran = 0
		t.State = map[string]any{"status": s.Status, "input": s.Raw}
	case core.ToolRunning:
		t.State = map[string]any{"status": s.Status, "input": input, "structured": structured, "content": []toolText{}}
	case core.ToolCompleted:
		t.State = map[string]any{"status": s.Status, "input": input, "structured": structured,
			"content": []toolText{{Type: "text", Text: s.Output}}}
	default:
		t.State = map[string]any{"status": core.ToolError, "input": input, "structured": structured, "content": []toolText{},
			"error": unknownError{Type: "unknown", Message: s.Error}}
	}
	return t
}
