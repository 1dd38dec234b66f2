package apiv2

import (
	"encoding/json"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// How each kind of log event becomes opencode 2's session events (see
// translate.go).

func (t *translator) messageUpdated(ev core.Event) []derived {
	var p core.MessageProps
	if json.Unmarshal(ev.Properties, &p) != nil {
		return nil
	}
	m := p.Info
	if len(t.steps) >= seenMax {
		t.steps = map[string]stepInfo{}
	}
	if m.Role == core.RoleUser {
		t.steps[m.ID] = stepInfo{user: true}
		if !t.prompted.add(m.ID) {
			return nil
		}
		// The prompt's parts are written with it: read them whole.
		full, err := t.a.st.Message(t.ctx, ev.SessionID, m.ID)
		if err != nil {
			return nil
		}
		switch u := userOf(full, nil).(type) {
		case compactionEntry:
			return []derived{{"session.next.compaction.started", with(base(ev), "messageID", m.ID, "reason", u.Reason)}}
		case userEntry:
			return []derived{{"session.next.prompted", with(base(ev), "messageID", m.ID, "delivery", "steer",
				"prompt", promptJSON{Text: u.Text, Files: u.Files, Agents: u.Agents})}}
		}
		return nil
	}
	t.steps[m.ID] = stepInfo{agent: agentOf(m), model: modelRef{ID: m.ModelID, ProviderID: m.ProviderID}}
	if m.Error != nil && m.Completed != 0 && t.failed.add(m.ID) {
		return []derived{{"session.next.step.failed", with(base(ev), "assistantMessageID", m.ID, "error", unknownOf(m.Error))}}
	}
	return nil
}

func agentOf(m core.Message) string {
	if m.Agent != "" {
		return m.Agent
	}
	return m.Mode
}

// step returns what is known of a message: from this stream's events,
// else from the store (a stream that started in the middle of a step).
func (t *translator) step(sessionID, messageID string) (stepInfo, bool) {
	if s, ok := t.steps[messageID]; ok {
		return s, true
	}
	m, err := t.a.st.Message(t.ctx, sessionID, messageID)
	if err != nil {
		return stepInfo{}, false
	}
	s := stepInfo{user: m.Info.Role == core.RoleUser, agent: agentOf(m.Info), model: modelRef{ID: m.Info.ModelID, ProviderID: m.Info.ProviderID}}
	if len(t.steps) >= seenMax {
		t.steps = map[string]stepInfo{}
	}
	t.steps[messageID] = s
	return s, true
}

func (t *translator) partUpdated(ev core.Event) []derived {
	var pp struct {
		Part core.Part `json:"part"`
	}
	if json.Unmarshal(ev.Properties, &pp) != nil {
		return nil
	}
	p := pp.Part
	switch p.Type {
	case core.PartStepStart, core.PartStepFinish, core.PartText, core.PartReasoning, core.PartTool:
	default:
		return nil
	}
	s, ok := t.step(ev.SessionID, p.MessageID)
	if !ok || s.user {
		return nil
	}
	switch p.Type {
	case core.PartStepStart:
		if ev.Seq == 0 {
			return nil
		}
		d := with(base(ev), "assistantMessageID", p.MessageID, "agent", s.agent, "model", s.model)
		if p.Snapshot != "" {
			d["snapshot"] = p.Snapshot
		}
		return []derived{{"session.next.step.started", d}}
	case core.PartStepFinish:
		if ev.Seq == 0 {
			return nil
		}
		d := with(base(ev), "assistantMessageID", p.MessageID, "finish", p.Reason, "cost", p.Cost, "tokens", p.Tokens)
		if p.Snapshot != "" {
			d["snapshot"] = p.Snapshot
		}
		return []derived{{"session.next.step.ended", d}}
	case core.PartTool:
		return t.tool(ev, p)
	}
	return t.streamed(ev, p)
}

// streamed is a text or reasoning part: announced once per stream (at its
// live preview, its first delta, or its end), ended when its durable
// version is final.
func (t *translator) streamed(ev core.Event, p core.Part) []derived {
	if p.Synthetic {
		return nil
	}
	kind, idField := "text", "textID"
	if p.Type == core.PartReasoning {
		kind, idField = "reasoning", "reasoningID"
	}
	t.kinds[p.ID] = p.Type
	if len(t.kinds) > seenMax {
		t.kinds = map[string]core.PartType{}
	}
	var out []derived
	if t.started.add(p.ID) {
		out = append(out, derived{"session.next." + kind + ".started", with(base(ev), "assistantMessageID", p.MessageID, idField, p.ID)})
	}
	if ev.Seq > 0 && p.Time.End != 0 {
		out = append(out, derived{"session.next." + kind + ".ended", with(base(ev), "assistantMessageID", p.MessageID, idField, p.ID, "text", p.Text)})
		delete(t.started, p.ID)
	}
	// A partial flush (on a replay, the part's first record) only
	// announces the part.
	return out
}

// delta is a live fragment of a text or reasoning part.
func (t *translator) delta(ev core.Event) []derived {
	var d core.DeltaProps
	if json.Unmarshal(ev.Properties, &d) != nil || d.Field != "text" {
		return nil
	}
	kind, idField := "text", "textID"
	if t.kinds[d.PartID] == core.PartReasoning {
		kind, idField = "reasoning", "reasoningID"
	}
	var out []derived
	if t.started.add(d.PartID) {
		out = append(out, derived{"session.next." + kind + ".started", with(base(ev), "assistantMessageID", d.MessageID, idField, d.PartID)})
	}
	return append(out, derived{"session.next." + kind + ".delta", with(base(ev), "assistantMessageID", d.MessageID, idField, d.PartID, "delta", d.Delta)})
}

// tool is a tool call: called once it runs (recorded before it runs), then
// its success or failure.
func (t *translator) tool(ev core.Event, p core.Part) []derived {
	if ev.Seq == 0 {
		return nil
	}
	s := p.State
	d := with(base(ev), "assistantMessageID", p.MessageID, "callID", p.CallID, "provider", toolProvider{})
	structured := s.Metadata
	if structured == nil {
		structured = map[string]any{}
	}
	switch s.Status {
	case core.ToolRunning:
		if !t.called.add(p.CallID) {
			return nil
		}
		return []derived{{"session.next.tool.called", with(d, "tool", p.Tool, "input", json.RawMessage(core.StoredInput(s.Input)))}}
	case core.ToolCompleted:
		return []derived{{"session.next.tool.success", with(d, "structured", structured, "content", []toolText{{Type: "text", Text: s.Output}})}}
	case core.ToolError:
		return []derived{{"session.next.tool.failed", with(d, "error", unknownError{Type: "unknown", Message: s.Error})}}
	}
	return nil
}

// runUpdated is a run's start (queued to running, once), its retries, its
// resumption after a restart (opencode 2's synthetic note) and its end.
func (t *translator) runUpdated(ev core.Event) []derived {
	var p core.RunProps
	if json.Unmarshal(ev.Properties, &p) != nil {
		return nil
	}
	r := p.Run
	sid := map[string]any{"sessionID": r.SessionID}
	switch {
	case r.State == core.RunRunning && r.Phase == "" && r.Steps == 0 && r.Resumes == 0 && r.Attempt == 0:
		return []derived{{"session.execution.started", sid}}
	case r.State == core.RunRunning && r.Phase == core.PhaseRecovering:
		return []derived{{"session.next.synthetic", with(base(ev), "messageID", t.resumed(r), "text", resumeNote)}}
	case r.State == core.RunRetrying:
		return []derived{{"session.next.retried", with(base(ev), "attempt", r.Attempt,
			"error", map[string]any{"message": r.RetryMessage, "isRetryable": true})}}
	case r.State == core.RunSucceeded:
		return []derived{{"session.execution.succeeded", sid}}
	case r.State == core.RunFailed:
		return []derived{{"session.execution.failed", with(sid, "error", failureOf(r))}}
	case r.State == core.RunInterrupted:
		return []derived{{"session.execution.interrupted", with(sid, "reason", interruptReason(r.Reason))}}
	}
	return nil
}

// interruptReason maps agentd's reasons onto opencode 2's: a user's
// abort, a restart that did not resume the run, a busy policy's
// interrupt. (opencode's inactivity has no counterpart: agentd ends no
// run for being quiet.)
func interruptReason(r core.EndReason) string {
	switch r {
	case core.ReasonServerRestart:
		return "shutdown"
	case core.ReasonSuperseded:
		return "superseded"
	}
	return "user"
}

// failureOf is a failed run's error as opencode 2's StructuredError:
// agentd's reason is its type.
func failureOf(r core.Run) structuredError {
	e := structuredError{Type: string(r.Reason), Message: "the run failed"}
	if e.Type == "" {
		e.Type = "unknown"
	}
	if r.Error != nil {
		e.Message = r.Error.Data.Message
		if n, ok := r.Error.Data.Extra["statusCode"].(float64); ok {
			e.Status = int(n)
		}
	}
	return e
}

// resumed is the id of the note a resumed run continues from: the
// transcript's, after the message the restart cut off (the latest such
// message of the run that was cut off by then).
func (t *translator) resumed(r core.Run) string {
	msgs, err := t.a.st.RunMessages(t.ctx, r.ID)
	if err != nil {
		return resumeID(core.NewID(core.PrefixMessage, false))
	}
	id := ""
	for _, m := range msgs {
		if cutOffByRestart(m) {
			id = m.ID
		}
	}
	if id == "" {
		// Cut off before it wrote a step: the note follows its prompt.
		id = r.UserMessageID
	}
	return resumeID(id)
}

// compacted is a compaction's end: its summary, from the store (the
// latest compaction asked for by the time of the event).
func (t *translator) compacted(ev core.Event) []derived {
	msgs, err := t.a.st.Messages(t.ctx, ev.SessionID, store.MessageQuery{MaxBytes: contextBytes})
	if err != nil {
		return nil
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Info.Role != core.RoleUser || msgs[i].Info.Created > stamp(ev) {
			continue
		}
		if c, ok := userOf(msgs[i], msgs[i+1:]).(compactionEntry); ok {
			return []derived{{"session.next.compaction.ended", with(base(ev), "messageID", c.ID, "reason", c.Reason, "text", c.Summary, "recent", "")}}
		}
	}
	return nil
}

// sessionUpdated tells the changes of the session's revert point: staged
// when one is set (or moved), cleared when an unrevert removes it,
// committed when it goes after the messages it hid were retired.
func (t *translator) sessionUpdated(ev core.Event) []derived {
	var p core.SessionProps
	if json.Unmarshal(ev.Properties, &p) != nil {
		return nil
	}
	prev, known := t.reverts[ev.SessionID]
	cur := ""
	if r := p.Info.Revert; r != nil {
		cur = r.MessageID + "/" + r.PartID
	}
	t.reverts[ev.SessionID] = cur
	if len(t.reverts) > seenMax {
		t.reverts = map[string]string{}
	}
	from := t.removed[ev.SessionID]
	delete(t.removed, ev.SessionID)
	switch {
	case cur != "" && (!known || prev != cur):
		return []derived{{"session.next.revert.staged", with(base(ev), "revert", revertOf(p.Info.Revert))}}
	case cur == "" && from != "":
		return []derived{{"session.next.revert.committed", with(base(ev), "messageID", from)}}
	case cur == "" && known && prev != "":
		return []derived{{"session.next.revert.cleared", base(ev)}}
	}
	return nil
}
