// Package openai is the provider for OpenAI Chat Completions and every
// compatible endpoint (OpenRouter, vLLM, llama.cpp, LM Studio, Ollama …),
// through the official openai-go SDK with its own retries off: agentd
// retries itself, visibly.
package openai

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentd/agentd/internal/llm"
)

// Options configures one OpenAI-compatible endpoint.
type Options struct {
	BaseURL string
	APIKey  string
	Headers map[string]string
	// Timeout bounds one request (0: none; the stream may be long).
	Timeout time.Duration
	// HTTPClient overrides the shared llm.HTTPClient (tests).
	HTTPClient *http.Client
}

// Provider streams chat completions.
type Provider struct {
	// Only the chat completions service is built (with the defaults
	// NewClient would give it): the client's two dozen other services
	// kept a third of the SDK's code in the binary for nothing.
	chat sdk.ChatCompletionService
}

// New returns a provider for the endpoint.
func New(o Options) *Provider {
	opts := []option.RequestOption{option.WithMaxRetries(0)}
	if o.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(o.BaseURL))
	}
	if o.APIKey != "" {
		opts = append(opts, option.WithAPIKey(o.APIKey))
	} else {
		// Local servers often need no key; the SDK insists on one.
		opts = append(opts, option.WithAPIKey("agentd-no-key"))
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
	return &Provider{chat: sdk.NewChatCompletionService(append(sdk.DefaultClientOptions(), opts...)...)}
}

func params(req llm.Request) sdk.ChatCompletionNewParams {
	var msgs []sdk.ChatCompletionMessageParamUnion
	if sys := req.SystemText(); sys != "" {
		msgs = append(msgs, sdk.SystemMessage(sys))
	}
	for _, m := range req.Messages {
		switch m.Role {
		case llm.RoleUser:
			var text string
			for _, c := range m.Content {
				switch c.Type {
				case llm.ContentText:
					if text != "" {
						text += "\n"
					}
					text += c.Text
				case llm.ContentToolResult:
					msgs = append(msgs, sdk.ToolMessage(c.Text, c.CallID))
				}
			}
			if text != "" {
				msgs = append(msgs, sdk.UserMessage(text))
			}
		case llm.RoleAssistant:
			var a sdk.ChatCompletionAssistantMessageParam
			var text string
			for _, c := range m.Content {
				switch c.Type {
				case llm.ContentText:
					text += c.Text
				case llm.ContentToolCall:
					args := string(c.Input)
					if args == "" {
						args = "{}"
					}
					a.ToolCalls = append(a.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{
						OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
							ID:       c.CallID,
							Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: args},
						},
					})
				}
			}
			if text != "" {
				a.Content.OfString = sdk.String(text)
			}
			msgs = append(msgs, sdk.ChatCompletionMessageParamUnion{OfAssistant: &a})
		}
	}
	p := sdk.ChatCompletionNewParams{
		Model:         shared.ChatModel(req.Model),
		Messages:      msgs,
		StreamOptions: sdk.ChatCompletionStreamOptionsParam{IncludeUsage: sdk.Bool(true)},
	}
	if req.MaxTokens > 0 {
		p.MaxTokens = sdk.Int(int64(req.MaxTokens))
	}
	if req.Temperature != nil {
		p.Temperature = sdk.Float(*req.Temperature)
	}
	if req.TopP != nil {
		p.TopP = sdk.Float(*req.TopP)
	}
	// opencode's key for OpenAI's reasoning effort.
	if effort, ok := req.Options["reasoningEffort"].(string); ok && effort != "" {
		p.ReasoningEffort = shared.ReasoningEffort(effort)
	}
	for _, t := range req.Tools {
		var schema map[string]any
		_ = json.Unmarshal(t.Schema, &schema)
		p.Tools = append(p.Tools, sdk.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: t.Name, Description: sdk.String(t.Description), Parameters: schema,
		}))
	}
	return p
}

// Stream implements llm.Provider.
func (p *Provider) Stream(ctx context.Context, req llm.Request, emit func(llm.Event) error) error {
	stream := p.chat.NewStreaming(ctx, params(req))
	defer stream.Close()
	type call struct {
		id, name string
		args     []byte
	}
	calls := map[int64]*call{}
	var usage llm.Usage
	finish := ""
	for stream.Next() {
		chunk := stream.Current()
		if chunk.JSON.Usage.Valid() {
			u := chunk.Usage
			usage = llm.Usage{Input: u.PromptTokens - u.PromptTokensDetails.CachedTokens, Output: u.CompletionTokens,
				Reasoning: u.CompletionTokensDetails.ReasoningTokens, CacheRead: u.PromptTokensDetails.CachedTokens,
				CacheWrite: u.PromptTokensDetails.CacheWriteTokens}
		}
		for _, ch := range chunk.Choices {
			if ch.Delta.Content != "" {
				if err := emit(llm.Event{Kind: llm.EventText, Text: ch.Delta.Content}); err != nil {
					return err
				}
			}
			if r, ok := ch.Delta.JSON.ExtraFields["reasoning_content"]; ok {
				var s string
				if json.Unmarshal([]byte(r.Raw()), &s) == nil && s != "" {
					if err := emit(llm.Event{Kind: llm.EventReasoning, Text: s}); err != nil {
						return err
					}
				}
			}
			for _, tc := range ch.Delta.ToolCalls {
				c := calls[tc.Index]
				if c == nil {
					c = &call{}
					calls[tc.Index] = c
				}
				if tc.ID != "" {
					c.id = tc.ID
				}
				if tc.Function.Name != "" {
					c.name = tc.Function.Name
				}
				c.args = append(c.args, tc.Function.Arguments...)
			}
			if ch.FinishReason != "" {
				finish = ch.FinishReason
			}
		}
	}
	if err := stream.Err(); err != nil {
		return classify(err)
	}
	idx := make([]int64, 0, len(calls))
	for i := range calls {
		idx = append(idx, i)
	}
	sort.Slice(idx, func(a, b int) bool { return idx[a] < idx[b] })
	for _, i := range idx {
		c := calls[i]
		if err := emit(llm.Event{Kind: llm.EventToolCall, CallID: c.id, Name: c.name, Input: json.RawMessage(c.args)}); err != nil {
			return err
		}
	}
	switch finish {
	case "tool_calls":
		finish = "tool-calls"
	case "":
		finish = "stop"
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
