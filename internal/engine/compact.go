package engine

import (
	"context"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/modelview"
	"github.com/agentd/agentd/internal/plugin"
	"github.com/agentd/agentd/internal/prompt"
	"github.com/agentd/agentd/internal/store"
)

// Compaction keeps a long session within the model's context window. When
// the next request would not fit (or the provider refused one as too
// long), the run compacts before its next step, in phase "compacting":
//
//  1. Old tool outputs are pruned: the model sees a marker instead, the
//     transcript keeps them (their time.compacted is set).
//  2. If that is not enough, the model writes a summary. A user message
//     with a compaction part and an assistant message marked summary are
//     added to the transcript, and later steps send the summary and the
//     messages from the compaction's tail on instead of the whole history.
//
// Nothing is deleted, so a crash in the middle loses nothing: a summary
// that did not complete is not used, and the resumed run compacts again.

// bytesPerToken is the rough size of a token, for estimates.
const bytesPerToken = 4

// protectedToolTokens bounds the newest tool output kept when pruning.
const protectedToolTokens = 40000

// estimate is a request's size in tokens, roughly.
func estimate(system []string, msgs []llm.Message, tools []llm.ToolSpec) int {
	n := 0
	for _, s := range system {
		n += len(s)
	}
	for _, t := range tools {
		n += len(t.Name) + len(t.Description) + len(t.Schema)
	}
	for _, m := range msgs {
		n += 16
		for _, c := range m.Content {
			n += c.Size()
		}
	}
	return n / bytesPerToken
}

// needsCompaction reports whether the next request would not fit.
func (r *runner) needsCompaction(history []llm.Message) bool {
	usable := usableTokens(r.model)
	if usable == 0 || r.justCompacted {
		return false
	}
	need := max(estimate(r.system, history, r.tools), int(r.lastInput))
	return need > usable
}

// compact makes the conversation fit before the next step; overflow means
// the provider refused the last request, which skips straight to a
// summary. done is true when the run must end (a zero outcome means it
// was cancelled).
func (r *runner) compact(ctx context.Context, overflow bool) (outcome, bool) {
	if err := r.setPhase(ctx, core.PhaseCompacting); err != nil {
		return outcome{}, true
	}
	r.lastInput = 0
	if !overflow {
		pruned, err := r.prune(ctx)
		if err != nil {
			return outcome{}, true
		}
		if pruned {
			history, _, err := r.history(ctx)
			if err != nil {
				return outcome{}, true
			}
			if !r.needsCompaction(history) {
				r.justCompacted = true
				return outcome{}, r.setPhase(ctx, "") != nil
			}
		}
	}
	_, parent, err := r.history(ctx)
	if err != nil {
		return outcome{}, true
	}
	if o, done := r.summarize(ctx, overflow, true, parent); done {
		return o, true
	}
	r.justCompacted = true
	if err := r.setPhase(ctx, ""); err != nil || overflow {
		return outcome{}, err != nil
	}
	// experimental.compaction.autocontinue, where opencode adds its "continue" turn: false ends the run, as there.
	in := plugin.StepInput{SessionID: r.run.SessionID, Directory: r.dir, MessageID: parent, Agent: r.agent.Name, Model: r.run.Model}
	return succeeded, !r.e.cfg.Hooks.AutoContinue(ctx, in)
}

// setPhase records the run's phase (and the status it implies).
func (r *runner) setPhase(ctx context.Context, phase core.Phase) error {
	if r.run.Phase == phase {
		return nil
	}
	return r.setState(ctx, func(run *core.Run) error { run.Phase = phase; return nil })
}

// view returns the messages the model currently sees, whole: those the
// session's latest completed compaction keeps, or all.
func (r *runner) view(ctx context.Context) ([]core.MessageWithParts, error) {
	msgs, err := r.e.st.Messages(ctx, r.run.SessionID, store.MessageQuery{})
	if err != nil {
		return nil, err
	}
	if c := modelview.Latest(msgs); c != nil {
		msgs = c.Kept(msgs)
	}
	return msgs, nil
}

// prune hides the oldest tool outputs from the model, keeping the newest
// within a budget, and reports whether it hid any.
func (r *runner) prune(ctx context.Context) (bool, error) {
	msgs, err := r.view(ctx)
	if err != nil {
		return false, err
	}
	budget := min(protectedToolTokens, usableTokens(r.model)/4) * bytesPerToken
	kept := 0
	var prune []core.Part
	for i := len(msgs) - 1; i >= 0; i-- {
		for j := len(msgs[i].Parts) - 1; j >= 0; j-- {
			p := msgs[i].Parts[j]
			if p.Type != core.PartTool || p.State.Status != core.ToolCompleted || p.State.Time.Compacted != 0 {
				continue
			}
			// The newest output is always kept, whatever its size.
			if kept > budget {
				prune = append(prune, p)
			}
			kept += len(p.State.Output)
		}
	}
	if len(prune) == 0 {
		return false, nil
	}
	now := r.e.now()
	err = r.tx(ctx, func(tx store.Tx) error {
		w := writer{ctx: ctx, tx: tx}
		for _, p := range prune {
			p.State.Time.Compacted = now
			w.part(p)
		}
		return w.err
	})
	if err != nil {
		return false, err
	}
	r.forgetHistory()
	return true, nil
}

// forgetHistory drops the converted history after the transcript's view
// changed under it.
func (r *runner) forgetHistory() {
	r.prefix, r.own = nil, nil
	r.e.history.Drop(r.run.SessionID)
}

// summarize has the model write a summary of the conversation as a step
// of the run. auto is false for a compaction a client asked for, whose
// user message is the run's own; tailStart is the first message kept
// verbatim after the summary ("" for none).
func (r *runner) summarize(ctx context.Context, overflow, auto bool, tailStart string) (outcome, bool) {
	msgs, err := r.view(ctx)
	if err != nil {
		return outcome{}, true
	}
	var history []llm.Message
	if tailStart == "" {
		history, _ = modelview.Compose(r.run.ID, msgs, nil)
	} else {
		var before []core.MessageWithParts
		for _, m := range msgs {
			if m.Info.ID == tailStart {
				break
			}
			before = append(before, m)
		}
		history, _ = modelview.Compose(r.run.ID, before, nil)
	}
	system := []string{prompt.Summary}
	target := usableTokens(r.model)
	if target == 0 {
		target = estimate(system, history, nil) / 2
	}
	history = fit(system, history, target)
	history = append(history, llm.Message{Role: llm.RoleUser, Content: []llm.Content{{Type: llm.ContentText,
		Text: "Summarise our conversation so far, following your instructions."}}})

	now := r.e.now()
	sess, err := r.e.st.Session(ctx, r.run.SessionID)
	if err != nil {
		return outcome{}, true
	}
	userID := r.run.UserMessageID
	var before func(*writer)
	if auto {
		user := core.Message{ID: core.NewID(core.PrefixMessage, false), SessionID: r.run.SessionID, Role: core.RoleUser,
			Created: now, Agent: modelview.CompactionAgent, Model: r.run.Model, RunID: r.run.ID}
		part := core.Part{ID: core.NewID(core.PrefixPart, false), SessionID: user.SessionID, MessageID: user.ID,
			Type: core.PartCompaction, Auto: true, Overflow: overflow, TailStart: tailStart}
		userID = user.ID
		before = func(w *writer) {
			w.insertMessage(user)
			w.part(part)
		}
	}
	req := llm.Request{Model: r.model.Name, System: system, Messages: llm.FitInput(history, r.model), MaxTokens: r.model.Output,
		Options: r.options, Purpose: llm.PurposeSummary}
	step := plugin.StepInput{SessionID: r.run.SessionID, Directory: r.dir, MessageID: userID, Agent: modelview.CompactionAgent, Model: r.run.Model}
	if err := r.e.cfg.Hooks.Request(ctx, step, &req); err != nil {
		return outcome{state: core.RunFailed, reason: core.ReasonInternal, err: core.UnknownError(core.RefInternal, err.Error())}, true
	}
	msg := assistantMessage(r.run, sess, userID, now)
	msg.Summary, msg.Mode, msg.Agent = true, modelview.CompactionAgent, modelview.CompactionAgent
	if err := r.openStep(ctx, msg, before); err != nil {
		return outcome{}, true
	}
	r.compacting = true
	defer func() { r.compacting = false }()
	if o, done := r.callWithRetry(ctx, r.provider, req); done {
		return o, true
	}
	err = r.tx(ctx, func(tx store.Tx) error {
		w := writer{ctx: ctx, tx: tx}
		w.event(r.run.SessionID, core.EventSessionCompacted, core.CompactedProps{SessionID: r.run.SessionID})
		return w.err
	})
	if err != nil {
		return outcome{}, true
	}
	r.forgetHistory()
	return outcome{}, false
}

// fit drops the oldest messages until the request is within target
// tokens, and then any leading message that is not a user's prompt (a
// tool result must follow its call).
func fit(system []string, msgs []llm.Message, target int) []llm.Message {
	for len(msgs) > 1 && estimate(system, msgs, nil) > target {
		msgs = msgs[1:]
	}
	for len(msgs) > 1 && !isPrompt(msgs[0]) {
		msgs = msgs[1:]
	}
	return msgs
}

// isPrompt reports whether m is a user message with text and no tool
// results.
func isPrompt(m llm.Message) bool {
	if m.Role != llm.RoleUser {
		return false
	}
	for _, c := range m.Content {
		if c.Type != llm.ContentText {
			return false
		}
	}
	return len(m.Content) > 0
}

// compactionRequest reports whether the run was started to compact the
// session (POST /session/{id}/summarize), and whether that compaction is
// already done (the server stopped after it).
func (r *runner) compactionRequest(ctx context.Context) (asked, done bool, err error) {
	m, err := r.e.st.Message(ctx, r.run.SessionID, r.run.UserMessageID)
	if err != nil {
		return false, false, err
	}
	for _, p := range m.Parts {
		if p.Type == core.PartCompaction {
			asked = true
		}
	}
	if !asked {
		return false, false, nil
	}
	msgs, err := r.e.st.Messages(ctx, r.run.SessionID, store.MessageQuery{Since: r.run.UserMessageID})
	if err != nil {
		return true, false, err
	}
	c := modelview.Latest(msgs)
	return true, c != nil && c.UserID == r.run.UserMessageID, nil
}
