package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/agent"
	"github.com/agentd/agentd/internal/asks"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/tool"
)

// The task tool hands a piece of work to a subagent in a child session: a
// run like any other (status, outcome, abort, recovery), whose answer
// becomes the tool's result. The child's session and message ids are
// written into the call's part before the child's run is admitted, and
// the admission is idempotent on that message id, so a parent cut off
// while it waited takes up the same child again after a restart — it
// never starts a second one — and a child that ended meanwhile delivers
// its answer.

// TaskToolName is the name of the tool that starts subagents.
const TaskToolName = "task"

type taskTool struct{ e *Engine }

// tool returns the named tool: the engine's own task tool (it belongs to
// this engine; the registry may outlive it, as in a restart in the same
// process), else the registry's.
func (e *Engine) tool(name string) (tool.Tool, bool) {
	if t, ok := e.tools.Get(name); ok {
		return t, true
	}
	for _, t := range e.ownTools() {
		if t.Name() == name {
			return t, true
		}
	}
	return nil, false
}

// ownTools are the tools the engine itself answers: task, and question
// when the operator turned it on.
func (e *Engine) ownTools() []tool.Tool {
	own := []tool.Tool{e.task}
	if e.cfg.Questions {
		own = append(own, asks.QuestionTool{})
	}
	return own
}

// Tools lists every tool the node offers agents (its registry's and the
// engine's own), sorted by name.
func (e *Engine) Tools() []tool.Tool { return e.allTools() }

// allTools lists every tool offered to agents, sorted by name; a
// registered tool wins over the engine's own of the same name.
func (e *Engine) allTools() []tool.Tool {
	all := e.tools.All()
	for _, t := range e.ownTools() {
		if _, ok := e.tools.Get(t.Name()); ok {
			continue
		}
		i := sort.Search(len(all), func(i int) bool { return all[i].Name() >= t.Name() })
		all = slices.Insert(all, i, t)
	}
	return all
}

type taskInput struct {
	Description  string `json:"description"`
	Prompt       string `json:"prompt"`
	SubagentType string `json:"subagent_type"`
	// TaskID continues an earlier child session of this session.
	TaskID string `json:"task_id"`
}

func (t *taskTool) Name() string { return TaskToolName }

func (t *taskTool) Description() string {
	var b strings.Builder
	b.WriteString("Starts a subagent on a task of its own, in a child session, and returns its final answer. " +
		"Use it for research or multi-step work whose details the conversation does not need: give the subagent " +
		"a complete, self-contained prompt (it sees nothing of this conversation) and say what it should report back. " +
		"Several task calls in one message run at the same time.\n" +
		"- description: a few words naming the task.\n- prompt: the whole task.\n" +
		"- subagent_type: which subagent.\n- task_id: the task_id of an earlier task, to continue that child session.\n" +
		"Subagents:")
	for _, a := range t.e.cfg.Agents.All() {
		if a.Mode == agent.ModeSubagent || a.Mode == agent.ModeAll {
			fmt.Fprintf(&b, "\n- %s: %s", a.Name, a.Description)
		}
	}
	return b.String()
}

func (t *taskTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"description":{"type":"string"},"prompt":{"type":"string"},` +
		`"subagent_type":{"type":"string"},"task_id":{"type":"string"}},"required":["description","prompt","subagent_type"]}`)
}

// Needs implements tool.Permissioned: the task permission, matched against
// the subagent's name.
func (t *taskTool) Needs(call tool.Call) []tool.Need {
	var in taskInput
	if json.Unmarshal(call.Input, &in) != nil || in.SubagentType == "" {
		return nil
	}
	return []tool.Need{{Permission: "task", Patterns: []string{in.SubagentType}, Always: []string{in.SubagentType},
		Title: "Start the " + in.SubagentType + " subagent: " + in.Description}}
}

// taskChild is what a task call's part records of its child.
type taskChild struct {
	sessionID, messageID string
}

// childOf reads the child a task call's part records, if any.
func childOf(p core.Part) (taskChild, bool) {
	if p.Tool != TaskToolName {
		return taskChild{}, false
	}
	sid, _ := p.State.Metadata["sessionId"].(string)
	mid, _ := p.State.Metadata["messageId"].(string)
	return taskChild{sid, mid}, sid != "" && mid != ""
}

func (t *taskTool) Run(ctx context.Context, call tool.Call) (tool.Result, error) {
	e := t.e
	var in taskInput
	if err := json.Unmarshal(call.Input, &in); err != nil {
		return tool.Errorf("invalid input: " + err.Error()), nil
	}
	if strings.TrimSpace(in.Prompt) == "" || in.SubagentType == "" {
		return tool.Errorf("prompt and subagent_type are required"), nil
	}
	ag, refusal := t.subagent(in.SubagentType)
	if refusal != nil {
		return *refusal, nil
	}
	parent, part, err := t.callPart(ctx, call)
	if err != nil {
		return tool.Result{}, err
	}
	child, resumed := childOf(part)
	if !resumed {
		if child, err = t.startChild(ctx, call, part, in, ag); err != nil {
			var ma *modelAnswer
			if errors.As(err, &ma) {
				return ma.res, nil
			}
			return tool.Result{}, err
		}
	}
	// Admit the child's prompt: a second admission of the same message
	// (after a restart) finds the first one's run.
	model := core.ModelRef{ProviderID: parent.Info.ProviderID, ModelID: parent.Info.ModelID}
	pi := PromptInput{MessageID: child.messageID, Parts: []InputPart{{Type: core.PartText, Text: in.Prompt}},
		Agent: ag.Name, subagent: true, Policy: core.PolicyQueue}
	if ag.Model == nil && model.ProviderID != "" {
		pi.Model = &model
	}
	if run, err := e.st.Run(ctx, parent.Info.RunID); err == nil {
		pi.Interactive = run.Interactive // nobody answers the child's asks either
	}
	adm, err := e.Prompt(ctx, child.sessionID, pi)
	if err != nil {
		var ie *InputError
		if errors.As(err, &ie) {
			return tool.Errorf("start the subagent: " + ie.Error()), nil
		}
		return tool.Result{}, fmt.Errorf("start the subagent: %w", err)
	}
	run, err := e.WaitRun(ctx, adm.RunID)
	if err != nil {
		t.abortChild(ctx, child.sessionID, adm.RunID)
		return tool.Result{}, err
	}
	return t.result(ctx, in, child, run)
}

// subagent is the agent a task call names, or the refusal the model sees
// when it names no subagent.
func (t *taskTool) subagent(name string) (agent.Agent, *tool.Result) {
	ag, ok := t.e.agentFor(name)
	if ok && (ag.Mode == agent.ModeSubagent || ag.Mode == agent.ModeAll) {
		return ag, nil
	}
	var names []string
	for _, a := range t.e.cfg.Agents.All() {
		if a.Mode == agent.ModeSubagent || a.Mode == agent.ModeAll {
			names = append(names, a.Name)
		}
	}
	res := tool.Errorf(fmt.Sprintf("subagent_type %q is not a subagent; the subagents are: %s", name, strings.Join(names, ", ")))
	return ag, &res
}

// callPart reads the task call's message and its part as stored.
func (t *taskTool) callPart(ctx context.Context, call tool.Call) (core.MessageWithParts, core.Part, error) {
	parent, err := t.e.st.Message(ctx, call.SessionID, call.MessageID)
	if err != nil {
		return parent, core.Part{}, fmt.Errorf("read the task's message: %w", err)
	}
	for _, p := range parent.Parts {
		if p.ID == call.ID {
			return parent, p, nil
		}
	}
	return parent, core.Part{}, fmt.Errorf("task call %s: %w", call.ID, store.ErrNotFound)
}

// abortChild aborts the child's run when the parent's was aborted (a
// shutdown leaves both to be resumed).
func (t *taskTool) abortChild(ctx context.Context, sessionID, runID string) {
	var ab *abortCause
	if !errors.As(context.Cause(ctx), &ab) {
		return
	}
	actx, cancel := detached(ctx)
	defer cancel()
	if err := t.e.AbortRun(actx, sessionID, runID); err != nil && !errors.Is(err, ErrClosed) {
		t.e.log.Warn("abort the child of an aborted task", "session", sessionID, "err", err)
	}
}

// result is the call's result: the child's answer, or how its run ended.
func (t *taskTool) result(ctx context.Context, in taskInput, child taskChild, run core.Run) (tool.Result, error) {
	meta := map[string]any{"sessionId": child.sessionID, "messageId": child.messageID, "runId": run.ID}
	if run.State != core.RunSucceeded {
		msg := fmt.Sprintf("the subagent's run ended %s", run.State)
		if run.Reason != "" {
			msg += "/" + string(run.Reason)
		}
		if run.Error != nil && run.Error.Data.Message != "" {
			msg += ": " + run.Error.Data.Message
		}
		return tool.Result{Output: msg, IsError: true, Metadata: meta, Title: in.Description}, nil
	}
	answer, err := t.answer(ctx, child.sessionID, run.ID)
	if err != nil {
		return tool.Result{}, err
	}
	return tool.Result{Title: in.Description, Metadata: meta,
		Output: "task_id: " + child.sessionID + " (to continue this task, pass it as task_id)\n\n<task_result>\n" + answer + "\n</task_result>"}, nil
}

// startChild creates the child session (or takes the one task_id names)
// and records it, with the id its prompt will have, in the call's part.
// A *modelAnswer error is an answer for the model.
func (t *taskTool) startChild(ctx context.Context, call tool.Call, part core.Part, in taskInput, ag agent.Agent) (taskChild, error) {
	e := t.e
	child := taskChild{sessionID: in.TaskID, messageID: core.NewID(core.PrefixMessage, false)}
	err := e.st.Tx(ctx, func(tx store.Tx) error {
		w := writer{ctx: ctx, tx: tx}
		parentSess, err := tx.Session(ctx, call.SessionID)
		if err != nil {
			return err
		}
		if in.TaskID != "" {
			prev, err := tx.Session(ctx, in.TaskID)
			if err != nil || prev.ParentID != call.SessionID {
				return &modelAnswer{tool.Errorf(fmt.Sprintf("task_id %q is not a task of this session", in.TaskID))}
			}
		} else {
			now := time.Now()
			sess := core.Session{
				ID: core.NewID(core.PrefixSession, true), ProjectID: parentSess.ProjectID, Directory: parentSess.Directory,
				ParentID: parentSess.ID, Title: in.Description + " (@" + ag.Name + " subagent)", Version: parentSess.Version, Owner: parentSess.Owner,
				Time: core.SessionTime{Created: now.UnixMilli(), Updated: now.UnixMilli()},
				// Never wider than the parent: its client rules and its
				// agent's rules narrow the child, whatever the subagent's
				// own rules allow.
				Permission: append(append([]core.Rule{}, parentSess.Permission...), t.parentAgentRules(ctx, call)...),
			}
			sess.Slug = strings.ToLower(sess.ID[len(sess.ID)-8:])
			if err := tx.InsertSession(ctx, sess); err != nil {
				return err
			}
			w.event(sess.ID, core.EventSessionCreated, core.SessionProps{SessionID: sess.ID, Info: sess})
			child.sessionID = sess.ID
		}
		part.State.Title = in.Description
		part.State.Metadata = map[string]any{"sessionId": child.sessionID, "messageId": child.messageID}
		w.part(part)
		return w.err
	})
	return child, err
}

// parentAgentRules are the permission rules of the agent the parent run
// answers with.
func (t *taskTool) parentAgentRules(ctx context.Context, call tool.Call) []core.Rule {
	m, err := t.e.st.Message(ctx, call.SessionID, call.MessageID)
	if err != nil {
		return nil
	}
	if a, ok := t.e.agentFor(m.Info.Agent); ok {
		return a.Permission
	}
	return nil
}

// answer is the text of the child run's last assistant message.
func (t *taskTool) answer(ctx context.Context, sessionID, runID string) (string, error) {
	msgs, err := t.e.st.RunMessages(ctx, runID)
	if err != nil {
		return "", err
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != core.RoleAssistant {
			continue
		}
		m, err := t.e.st.Message(ctx, sessionID, msgs[i].ID)
		if err != nil {
			return "", err
		}
		var b strings.Builder
		for _, p := range m.Parts {
			if p.Type == core.PartText && !p.Synthetic && p.Text != "" {
				if b.Len() > 0 {
					b.WriteString("\n")
				}
				b.WriteString(p.Text)
			}
		}
		if b.Len() > 0 {
			return b.String(), nil
		}
	}
	return "", nil
}

// modelAnswer is a result for the model that ends a transaction early.
type modelAnswer struct{ res tool.Result }

func (m *modelAnswer) Error() string { return m.res.Output }
