package plugin

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/agentd/agentd/internal/llm"
)

// Command is command.execute.before, called where opencode calls it: a
// custom command's name and arguments in, the parts of the prompt its
// template made out (parts points to them, any slice whose JSON is
// opencode's part shape, changed in place), before the prompt is
// admitted, so what a plugin changed is stored with the prompt. A failed
// hook refuses the command with its reason.
func (h *Host) Command(ctx context.Context, dir, sessionID, name, args string, parts any) error {
	b, err := json.Marshal(parts)
	if err != nil {
		return err
	}
	var out struct {
		Parts json.RawMessage `json:"parts"`
	}
	in := map[string]any{"command": name, "sessionID": sessionID, "arguments": args}
	if err := h.hook(ctx, dir, sessionID, "command.execute.before", in,
		map[string]any{"parts": json.RawMessage(b)}, &out); err != nil || out.Parts == nil {
		return err
	}
	return json.Unmarshal(out.Parts, parts)
}

// compacting is experimental.session.compacting, before the model is
// asked for a compaction's summary: the plugins' context is added to the
// request's last message (the ask for the summary), or their prompt
// replaces it, as opencode does with its own ask.
func (h *Host) compacting(ctx context.Context, in StepInput, req *llm.Request) error {
	var out struct {
		Context []string `json:"context"`
		Prompt  *string  `json:"prompt"`
	}
	if err := h.hook(ctx, in.Directory, in.SessionID, "experimental.session.compacting",
		map[string]any{"sessionID": in.SessionID}, map[string]any{"context": []string{}}, &out); err != nil {
		return err
	}
	n := len(req.Messages)
	if (out.Prompt == nil && len(out.Context) == 0) || n == 0 {
		return nil
	}
	last := req.Messages[n-1]
	var text []string
	for _, c := range last.Content {
		if c.Type == llm.ContentText {
			text = append(text, c.Text)
		}
	}
	ask := strings.Join(append(text, out.Context...), "\n\n")
	if out.Prompt != nil {
		ask = *out.Prompt
	}
	last.Content = []llm.Content{{Type: llm.ContentText, Text: ask}}
	req.Messages = append(slices.Clone(req.Messages[:n-1]), last) // the engine's slice stays as built
	return nil
}
