// Package anthropic is the provider for Anthropic's Messages API, through
// the official SDK with its own retries off: agentd retries itself,
// visibly.
package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/agentd/agentd/internal/llm"
)

// Options configures one Messages endpoint.
type Options struct {
	BaseURL    string
	APIKey     string
	Headers    map[string]string
	Timeout    time.Duration
	HTTPClient *http.Client
	// MaxTokens is the output limit sent with each request; default 8192.
	MaxTokens int64
}

// Provider streams messages.
type Provider struct {
	client    sdk.Client
	maxTokens int64
}

// New returns a provider for the endpoint.
func New(o Options) *Provider {
	opts := []option.RequestOption{option.WithMaxRetries(0)}
	if o.BaseURL != "" {
		// opencode's (AI SDK) baseURL for Anthropic ends in /v1 and the
		// path appended is /messages; the Go SDK appends /v1/messages.
		base := strings.TrimSuffix(strings.TrimRight(o.BaseURL, "/"), "/v1")
		opts = append(opts, option.WithBaseURL(base+"/"))
	}
	if o.APIKey != "" {
		opts = append(opts, option.WithAPIKey(o.APIKey))
	}
	for k, v := range o.Headers {
		opts = append(opts, option.WithHeader(k, v))
	}
	if o.Timeout > 0 {
		opts = append(opts, option.WithRequestTimeout(o.Timeout))
	}
	client := o.HTTPClient
	if client == nil {
		client = llm.HTTPClient
	}
	opts = append(opts, option.WithHTTPClient(client))
	mt := o.MaxTokens
	if mt <= 0 {
		mt = 8192
	}
	return &Provider{client: sdk.NewClient(opts...), maxTokens: mt}
}

func (p *Provider) params(req llm.Request) sdk.MessageNewParams {
	type turn struct {
		assistant bool
		blocks    []sdk.ContentBlockParamUnion
	}
	var turns []turn
	for _, m := range req.Messages {
		var blocks []sdk.ContentBlockParamUnion
		for _, c := range m.Content {
			switch c.Type {
			case llm.ContentText:
				if c.Text != "" {
					blocks = append(blocks, sdk.NewTextBlock(c.Text))
				}
			case llm.ContentToolCall:
				var input any = map[string]any{}
				if len(c.Input) > 0 {
					_ = json.Unmarshal(c.Input, &input)
				}
				blocks = append(blocks, sdk.NewToolUseBlock(c.CallID, input, c.Name))
			case llm.ContentToolResult:
				blocks = append(blocks, sdk.NewToolResultBlock(c.CallID, c.Text, c.IsError))
			}
		}
		if len(blocks) == 0 {
			continue
		}
		turns = append(turns, turn{assistant: m.Role == llm.RoleAssistant, blocks: blocks})
	}
	mt := p.maxTokens
	if req.MaxTokens > 0 {
		mt = int64(req.MaxTokens)
	}
	// Prompt caching: one breakpoint after the system prompt (with the
	// tools before it, the stable prefix of every step) and one on the
	// newest message, so the next step reads the whole conversation from
	// the cache.
	if n := len(turns); n > 0 {
		blocks := turns[n-1].blocks
		if cc := blocks[len(blocks)-1].GetCacheControl(); cc != nil {
			*cc = sdk.NewCacheControlEphemeralParam()
		}
	}
	msgs := make([]sdk.MessageParam, 0, len(turns))
	for _, t := range turns {
		if t.assistant {
			msgs = append(msgs, sdk.NewAssistantMessage(t.blocks...))
		} else {
			msgs = append(msgs, sdk.NewUserMessage(t.blocks...))
		}
	}
	params := sdk.MessageNewParams{Model: sdk.Model(req.Model), MaxTokens: mt, Messages: msgs}
	for _, b := range req.System {
		if b != "" {
			params.System = append(params.System, sdk.TextBlockParam{Text: b})
		}
	}
	if n := len(params.System); n > 0 {
		params.System[n-1].CacheControl = sdk.NewCacheControlEphemeralParam()
	}
	if budget := thinkingBudget(req.Options); budget > 0 {
		params.Thinking = sdk.ThinkingConfigParamOfEnabled(budget)
		if params.MaxTokens <= budget {
			params.MaxTokens = budget + 4096
		}
	}
	for _, t := range req.Tools {
		var schema struct {
			Properties any      `json:"properties"`
			Required   []string `json:"required"`
		}
		_ = json.Unmarshal(t.Schema, &schema)
		tp := sdk.ToolParam{Name: t.Name, Description: sdk.String(t.Description),
			InputSchema: sdk.ToolInputSchemaParam{Properties: schema.Properties, Required: schema.Required}}
		params.Tools = append(params.Tools, sdk.ToolUnionParam{OfTool: &tp})
	}
	return params
}

// thinkingBudget reads opencode's thinking option:
// {"thinking": {"type": "enabled", "budgetTokens": N}}.
func thinkingBudget(opts map[string]any) int64 {
	t, ok := opts["thinking"].(map[string]any)
	if !ok || t["type"] == "disabled" {
		return 0
	}
	switch v := t["budgetTokens"].(type) {
	case float64:
		return int64(v)
	case int:
		return int64(v)
	case int64:
		return v
	}
	return 0
}

// Stream implements llm.Provider.
func (p *Provider) Stream(ctx context.Context, req llm.Request, emit func(llm.Event) error) error {
	var opts []option.RequestOption
	// The SDK's message parameters have no sampling fields; they are
	// still accepted by the API.
	if req.Temperature != nil {
		opts = append(opts, option.WithJSONSet("temperature", *req.Temperature))
	}
	if req.TopP != nil {
		opts = append(opts, option.WithJSONSet("top_p", *req.TopP))
	}
	stream := p.client.Messages.NewStreaming(ctx, p.params(req), opts...)
	defer stream.Close()
	type toolUse struct {
		id, name string
		input    []byte
	}
	var tool *toolUse
	var usage llm.Usage
	finish := "stop"
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "message_start":
			u := ev.Message.Usage
			usage.Input, usage.CacheRead, usage.CacheWrite = u.InputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens
			usage.Output = u.OutputTokens
		case "content_block_start":
			if ev.ContentBlock.Type == "tool_use" {
				tool = &toolUse{id: ev.ContentBlock.ID, name: ev.ContentBlock.Name}
			}
		case "content_block_delta":
			switch ev.Delta.Type {
			case "text_delta":
				if err := emit(llm.Event{Kind: llm.EventText, Text: ev.Delta.Text}); err != nil {
					return err
				}
			case "thinking_delta":
				if err := emit(llm.Event{Kind: llm.EventReasoning, Text: ev.Delta.Thinking}); err != nil {
					return err
				}
			case "input_json_delta":
				if tool != nil {
					tool.input = append(tool.input, ev.Delta.PartialJSON...)
				}
			}
		case "content_block_stop":
			if tool != nil {
				in := tool.input
				if len(in) == 0 {
					in = []byte("{}")
				}
				if err := emit(llm.Event{Kind: llm.EventToolCall, CallID: tool.id, Name: tool.name, Input: json.RawMessage(in)}); err != nil {
					return err
				}
				tool = nil
			}
		case "message_delta":
			if ev.Usage.OutputTokens > 0 {
				usage.Output = ev.Usage.OutputTokens
			}
			if ev.Usage.InputTokens > 0 {
				usage.Input = ev.Usage.InputTokens
			}
			if ev.Usage.CacheReadInputTokens > 0 {
				usage.CacheRead = ev.Usage.CacheReadInputTokens
			}
			if ev.Usage.CacheCreationInputTokens > 0 {
				usage.CacheWrite = ev.Usage.CacheCreationInputTokens
			}
			switch ev.Delta.StopReason {
			case "tool_use":
				finish = "tool-calls"
			case "max_tokens":
				finish = "length"
			case "":
			default:
				finish = "stop"
			}
		}
	}
	if err := stream.Err(); err != nil {
		return classify(err)
	}
	return emit(llm.Event{Kind: llm.EventFinish, Finish: finish, Usage: usage})
}

func classify(err error) error {
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		var h http.Header
		if apiErr.Response != nil {
			h = apiErr.Response.Header
		}
		msg := apiErr.Message
		if msg == "" {
			msg = apiErr.Error()
		}
		return llm.FromHTTP(apiErr.StatusCode, msg, h, apiErr.RawJSON(), time.Now())
	}
	return llm.FromTransport(err)
}
