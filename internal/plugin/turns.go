package plugin

import (
	"context"
	"encoding/json"

	"github.com/agentd/agentd/internal/core"
)

// Turns are the hooks opencode calls as a turn goes on rather than before
// a request: when a text part ends, after an automatic compaction, and
// when a small model is picked. Like every hook they are bounded by the
// hook timeout; a hook that fails or times out leaves what agentd would
// have done without plugins (the text as the model wrote it, the run going
// on, the run's own model), and says so in the log.
type Turns interface {
	// TextComplete is experimental.text.complete, as a text part of an
	// assistant message ends (opencode's text-end; part is the part in
	// dir, text its text): the text the plugins make of it, which the
	// engine writes as the part's final text.
	TextComplete(ctx context.Context, dir string, part core.Part, text string) string
	// AutoContinue is experimental.compaction.autocontinue, after an
	// automatic compaction succeeded: whether the run goes on.
	AutoContinue(ctx context.Context, in StepInput) bool
	// SmallModel is experimental.provider.small_model: the model the
	// plugins pick for the small tasks (titles) of a session in dir whose
	// model is of provider; nil when none picks one.
	SmallModel(ctx context.Context, dir, provider string) *core.ModelRef
}

// TextComplete implements Turns.
func (None) TextComplete(_ context.Context, _ string, _ core.Part, text string) string { return text }

// AutoContinue implements Turns.
func (None) AutoContinue(context.Context, StepInput) bool { return true }

// SmallModel implements Turns.
func (None) SmallModel(context.Context, string, string) *core.ModelRef { return nil }

// TextComplete implements Turns.
func (h *Host) TextComplete(ctx context.Context, dir string, part core.Part, text string) string {
	var out struct {
		Text *string `json:"text"`
	}
	err := h.hook(ctx, dir, part.SessionID, "experimental.text.complete",
		map[string]any{"sessionID": part.SessionID, "messageID": part.MessageID, "partID": part.ID},
		map[string]any{"text": text}, &out)
	if err != nil {
		h.log.Warn("the text stays as the model wrote it", "hook", "experimental.text.complete", "part", part.ID, "err", err)
		return text
	}
	if out.Text == nil {
		return text
	}
	return *out.Text
}

// AutoContinue implements Turns.
func (h *Host) AutoContinue(ctx context.Context, in StepInput) bool {
	model := modelJSON(in.Model)
	input := map[string]any{"sessionID": in.SessionID, "agent": in.Agent, "model": model,
		"provider": map[string]any{"source": "config", "info": providerInfo(in.Model.ProviderID, nil), "options": map[string]any{}},
		"message": map[string]any{"id": in.MessageID, "sessionID": in.SessionID, "role": "user", "agent": in.Agent,
			"model": map[string]any{"providerID": in.Model.ProviderID, "modelID": in.Model.ModelID}},
		"overflow": false}
	var out struct {
		Enabled *bool `json:"enabled"`
	}
	err := h.hook(ctx, in.Directory, in.SessionID, "experimental.compaction.autocontinue", input,
		map[string]any{"enabled": true}, &out)
	if err != nil {
		h.log.Warn("the run goes on after its compaction", "hook", "experimental.compaction.autocontinue", "session", in.SessionID, "err", err)
		return true
	}
	return out.Enabled == nil || *out.Enabled
}

// SmallModel implements Turns.
func (h *Host) SmallModel(ctx context.Context, dir, provider string) *core.ModelRef {
	var out struct {
		Model *struct {
			ID         string `json:"id"`
			ProviderID string `json:"providerID"`
		} `json:"model"`
	}
	err := h.hook(ctx, dir, "", "experimental.provider.small_model", map[string]any{"provider": providerInfo(provider, nil)},
		map[string]any{"model": nil}, &out)
	if err != nil {
		h.log.Warn("the session's own model writes its title", "hook", "experimental.provider.small_model", "err", err)
		return nil
	}
	if out.Model == nil || out.Model.ID == "" {
		return nil
	}
	ref := core.ModelRef{ProviderID: out.Model.ProviderID, ModelID: out.Model.ID}
	if ref.ProviderID == "" {
		ref.ProviderID = provider
	}
	return &ref
}

// Config is the configuration as the config hooks of dir's instance left
// it (the host hands each hook the same object, as opencode does); nil
// when no plugin there has a config hook.
func (h *Host) Config(ctx context.Context, dir string) (json.RawMessage, error) {
	p, ok, err := h.has(ctx, dir, "config")
	if err != nil || !ok {
		return nil, err
	}
	var out struct {
		Config json.RawMessage `json:"config"`
	}
	cctx, cancel := context.WithTimeout(ctx, h.opts.Timeout)
	defer cancel()
	if err := p.conn.call(cctx, "config", map[string]any{"directory": dir}, &out); err != nil {
		return nil, &HookError{Message: "plugin hook config: " + err.Error()}
	}
	return out.Config, nil
}
