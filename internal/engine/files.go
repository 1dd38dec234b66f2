package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/agentd/agentd/internal/agent"
	"github.com/agentd/agentd/internal/attach"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/permission"
	"github.com/agentd/agentd/internal/tool"
)

// attachFiles resolves a prompt's file parts before it is admitted
// (package attach): what the model reads of each file becomes synthetic
// text parts before its file part, under the rules the run's tools obey
// (the defaults, the configuration's, the agent's, the session's). A file
// the rules deny, or that the model cannot take, refuses the prompt. A
// message id admitted before is not read again: its admission stands.
func (e *Engine) attachFiles(ctx context.Context, in PromptInput, ag agent.Agent, sess core.Session, ref core.ModelRef) ([]InputPart, error) {
	if !slices.ContainsFunc(in.Parts, func(p InputPart) bool { return p.Type == core.PartFile }) {
		return in.Parts, nil
	}
	if in.MessageID != "" {
		if _, err := e.st.Message(ctx, sess.ID, in.MessageID); err == nil {
			return in.Parts, nil
		}
	}
	_, model, err := e.models.Resolve(ref)
	if err != nil {
		return nil, &InputError{fmt.Sprintf("model: %v", err)}
	}
	rules := append(append(permission.Defaults(), e.cfg.Permission...), ag.Permission...)
	env := attach.Env{Dir: sess.Directory, Model: model,
		Decide: func(n tool.Need) string { return n.Decide(rules, sess.Permission, sess.Granted) }}
	out := make([]InputPart, 0, len(in.Parts)+2)
	for i, p := range in.Parts {
		if p.Type != core.PartFile {
			out = append(out, p)
			continue
		}
		parts, err := attach.Resolve(ctx, env, attach.File{Mime: p.Mime, URL: p.URL, Filename: p.Filename, Source: p.Source})
		var ae *attach.Error
		if errors.As(err, &ae) {
			return nil, &InputError{fmt.Sprintf("parts[%d]: %s", i, ae.Msg)}
		}
		if err != nil {
			return nil, err
		}
		for _, r := range parts {
			if r.File == nil {
				out = append(out, InputPart{Type: core.PartText, Text: r.Text, Synthetic: true})
				continue
			}
			out = append(out, InputPart{ID: p.ID, Type: core.PartFile, Mime: r.File.Mime, URL: r.File.URL,
				Filename: r.File.Filename, Source: r.File.Source})
		}
	}
	return out, nil
}
