package engine

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/agentd/agentd/internal/agent"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/prompt"
	"github.com/agentd/agentd/internal/tool"
)

// agentFor returns the named agent ("" is the default one).
func (e *Engine) agentFor(name string) (agent.Agent, bool) {
	if name == "" {
		name = agent.Default
	}
	return e.cfg.Agents.Get(name)
}

// setup prepares what every step of the run sends besides the
// conversation: the agent, the model and its options, the system prompt
// and the tools. It runs once per execution of the run, so instruction
// files edited meanwhile are read by the next run.
func (r *runner) setup(ctx context.Context) error {
	e := r.e
	a, ok := e.agentFor(r.run.Agent)
	if !ok {
		// The agent was removed from the configuration since the prompt
		// was admitted; the default one carries on.
		a, _ = e.agentFor("")
	}
	r.agent = a
	provider, model, err := e.models.Resolve(r.run.Model)
	if err != nil {
		return err
	}
	r.provider, r.model = provider, model
	r.options = maps.Clone(model.Options)
	variant := r.run.Model.Variant
	if variant == "" {
		variant = a.Variant
	}
	if v, ok := model.Variants[variant]; ok {
		if r.options == nil {
			r.options = map[string]any{}
		}
		maps.Copy(r.options, v)
	}
	sess, err := e.st.Session(ctx, r.run.SessionID)
	if err != nil {
		return err
	}
	r.dir = sess.Directory
	extra := ""
	var format *core.OutputFormat
	if msg, err := e.st.Message(ctx, r.run.SessionID, r.run.UserMessageID); err == nil {
		extra, format = msg.Info.System, msg.Info.Format
	}
	r.system = prompt.System(prompt.Parts{
		Agent: a.Prompt,
		Instructions: prompt.Instructions(prompt.Sources{Directory: sess.Directory, GlobalDir: e.cfg.GlobalDir,
			Configured: e.cfg.Instructions}),
		Env:   prompt.Env{Directory: sess.Directory, Date: time.Now(), Model: r.run.Model.ProviderID + "/" + r.run.Model.ModelID},
		Extra: extra,
	})
	r.tools = r.tools[:0]
	for _, t := range e.allTools() {
		if !a.ToolEnabled(t.Name()) {
			continue
		}
		desc := t.Description()
		if c, ok := t.(tool.Contextual); ok {
			if desc = c.DescribeFor(sess.Directory, r.denies(sess)); desc == "" {
				continue
			}
		}
		r.tools = append(r.tools, llm.ToolSpec{Name: t.Name(), Description: desc, Schema: t.Schema()})
	}
	r.maxSteps = e.cfg.MaxSteps
	if a.Steps > 0 && a.Steps < r.maxSteps {
		r.maxSteps = a.Steps
	}
	return r.setupStructured(format)
}

// request is the model call of the next step.
func (r *runner) request(history []llm.Message) llm.Request {
	req := llm.Request{Model: r.model.Name, System: r.system, Messages: llm.FitInput(history, r.model), Tools: r.tools,
		MaxTokens: r.model.Output, Temperature: r.agent.Temperature, TopP: r.agent.TopP, Options: r.options}
	if r.structured != nil {
		req.ToolChoice = llm.ToolChoiceRequired
	}
	return req
}

// usableTokens is how many input tokens a request may hold: the model's
// context window less the room kept for its answer (0: unknown, never
// compact ahead of a refusal).
func usableTokens(m llm.Model) int {
	if m.Context <= 0 {
		return 0
	}
	out := m.Output
	if out <= 0 || out >= m.Context {
		out = m.Context / 5
	}
	return m.Context - out
}

// toolAllowed reports whether the run's agent offers the tool.
func (r *runner) toolAllowed(name string) bool { return r.agent.ToolEnabled(name) }

// modelError explains a model that cannot be used.
func modelError(err error) outcome {
	return outcome{state: core.RunFailed, reason: core.ReasonProviderError,
		err: core.UnknownError(core.RefModelNotFound, fmt.Sprintf("model: %v", err))}
}
