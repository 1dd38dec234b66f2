// Package anthropic is the provider for Anthropic's Messages API, through
// the official SDK with its own retries off: agentd retries itself,
// visibly.
package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"

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

// The request and the stream's events are encoded and decoded here, with
// encoding/json and structs that hold only what agentd sends and reads;
// the SDK still sends the request (base URL, key, version headers),
// splits the stream into events and turns error events and HTTP errors
// into its API errors. Its own types take 16 µs by reflection to decode
// one text delta, which a thousand sessions streaming from a real model
// pay tens of thousands of times a second. A test holds the body equal to
// what the SDK's types would send.

// messagesRequest is the body of a streamed Messages request.
type messagesRequest struct {
	Model       string      `json:"model"`
	MaxTokens   int64       `json:"max_tokens"`
	Messages    []turn      `json:"messages"`
	System      []block     `json:"system,omitempty"`
	Thinking    *thinking   `json:"thinking,omitempty"`
	Tools       []toolParam `json:"tools,omitempty"`
	ToolChoice  *toolChoice `json:"tool_choice,omitempty"`
	Stream      bool        `json:"stream"`
	Temperature *float64    `json:"temperature,omitempty"`
	TopP        *float64    `json:"top_p,omitempty"`
}

type toolChoice struct {
	Type string `json:"type"`
}

type turn struct {
	Role    string  `json:"role"`
	Content []block `json:"content"`
}

// block is a content block of any of the kinds agentd sends.
type block struct {
	Type         string          `json:"type"`
	Text         string          `json:"text,omitempty"`
	ID           string          `json:"id,omitempty"`
	Name         string          `json:"name,omitempty"`
	Input        json.RawMessage `json:"input,omitempty"`
	ToolUseID    string          `json:"tool_use_id,omitempty"`
	Content      []textBlock     `json:"content,omitempty"`
	IsError      *bool           `json:"is_error,omitempty"`
	Thinking     string          `json:"thinking,omitempty"`
	Signature    string          `json:"signature,omitempty"`
	Source       *source         `json:"source,omitempty"`
	Title        string          `json:"title,omitempty"`
	CacheControl *cacheControl   `json:"cache_control,omitempty"`
}

// source is where an image or a document block's data is: inline
// (base64) or, for an image, at a web address (url).
type source struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

// textBlock is a tool result's text, sent even when empty (the API
// requires it).
type textBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type cacheControl struct {
	Type string `json:"type"`
}

type thinking struct {
	Type         string `json:"type"`
	BudgetTokens int64  `json:"budget_tokens"`
}

type toolParam struct {
	Name        string      `json:"name"`
	Description string      `json:"description"`
	InputSchema inputSchema `json:"input_schema"`
}

type inputSchema struct {
	Type       string          `json:"type"`
	Properties json.RawMessage `json:"properties,omitempty"`
	Required   []string        `json:"required,omitempty"`
}

var ephemeral = &cacheControl{Type: "ephemeral"}

// body encodes req as a streamed Messages request.
func (p *Provider) body(req llm.Request) ([]byte, error) {
	r := messagesRequest{Model: req.Model, MaxTokens: p.maxTokens, Stream: true, Temperature: req.Temperature, TopP: req.TopP}
	if req.MaxTokens > 0 {
		r.MaxTokens = int64(req.MaxTokens)
	}
	for _, m := range req.Messages {
		var blocks []block
		for _, c := range m.Content {
			switch c.Type {
			case llm.ContentText:
				if c.Text != "" {
					blocks = append(blocks, block{Type: "text", Text: c.Text})
				}
			case llm.ContentToolCall:
				input := json.RawMessage(c.Input)
				if len(input) == 0 {
					input = emptyInput
				}
				blocks = append(blocks, block{Type: "tool_use", ID: c.CallID, Name: c.Name, Input: input})
			case llm.ContentReasoning:
				// Only thinking Anthropic signed goes back, and it goes
				// back whole: the API checks the signature.
				if c.Signature != "" {
					blocks = append(blocks, block{Type: "thinking", Thinking: c.Text, Signature: c.Signature})
				}
			case llm.ContentImage, llm.ContentDocument:
				blocks = append(blocks, mediaBlock(c))
			case llm.ContentToolResult:
				isError := c.IsError
				blocks = append(blocks, block{Type: "tool_result", ToolUseID: c.CallID, IsError: &isError,
					Content: []textBlock{{Type: "text", Text: c.Text}}})
			}
		}
		if len(blocks) == 0 {
			continue
		}
		role := "user"
		if m.Role == llm.RoleAssistant {
			role = "assistant"
		}
		r.Messages = append(r.Messages, turn{Role: role, Content: blocks})
	}
	// Prompt caching: one breakpoint after the system prompt (with the
	// tools before it, the stable prefix of every step) and one on the
	// newest message, so the next step reads the whole conversation from
	// the cache.
	if n := len(r.Messages); n > 0 {
		// Thinking blocks take no cache breakpoint.
		if blocks := r.Messages[n-1].Content; blocks[len(blocks)-1].Type != "thinking" {
			blocks[len(blocks)-1].CacheControl = ephemeral
		}
	}
	for _, b := range req.System {
		if b != "" {
			r.System = append(r.System, block{Type: "text", Text: b})
		}
	}
	if n := len(r.System); n > 0 {
		r.System[n-1].CacheControl = ephemeral
	}
	if budget := thinkingBudget(req.Options); budget > 0 {
		r.Thinking = &thinking{Type: "enabled", BudgetTokens: budget}
		if r.MaxTokens <= budget {
			r.MaxTokens = budget + 4096
		}
	}
	for _, t := range req.Tools {
		var schema struct {
			Properties json.RawMessage `json:"properties"`
			Required   []string        `json:"required"`
		}
		_ = json.Unmarshal(t.Schema, &schema)
		if string(schema.Properties) == "null" {
			schema.Properties = nil
		}
		// The schema goes even when it has no properties: the API requires
		// one (the SDK's types leave it out then).
		r.Tools = append(r.Tools, toolParam{Name: t.Name, Description: t.Description,
			InputSchema: inputSchema{Type: "object", Properties: schema.Properties, Required: schema.Required}})
	}
	if req.ToolChoice == llm.ToolChoiceRequired && len(r.Tools) > 0 {
		r.ToolChoice = &toolChoice{Type: "any"}
	}
	b, err := llm.EncodeBody(r, func() {
		// A tool input that is not JSON goes as an empty object, as the
		// SDK's types sent it.
		for _, t := range r.Messages {
			for i := range t.Content {
				if t.Content[i].Type == "tool_use" && !json.Valid(t.Content[i].Input) {
					t.Content[i].Input = emptyInput
				}
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("encode messages request: %w", err)
	}
	return b, nil
}

var emptyInput = json.RawMessage(`{}`)

// mediaBlock is a picture (an image block) or a PDF (a document block,
// titled with its file's name).
func mediaBlock(c llm.Content) block {
	src := &source{Type: "base64", MediaType: c.MediaType, Data: c.Data}
	if c.URL != "" {
		src = &source{Type: "url", URL: c.URL}
	}
	if c.Type == llm.ContentDocument {
		return block{Type: "document", Source: src, Title: c.Filename}
	}
	return block{Type: "image", Source: src}
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

// event is what agentd reads of one streamed event.
type event struct {
	Type    string `json:"type"`
	Message struct {
		Usage eventUsage `json:"usage"`
	} `json:"message"`
	ContentBlock struct {
		Type string `json:"type"`
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"content_block"`
	Delta struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Thinking    string `json:"thinking"`
		PartialJSON string `json:"partial_json"`
		Signature   string `json:"signature"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage eventUsage `json:"usage"`
}

type eventUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
}

// Stream implements llm.Provider.
func (p *Provider) Stream(ctx context.Context, req llm.Request, emit func(llm.Event) error) error {
	b, err := p.body(req)
	if err != nil {
		return err
	}
	var res *http.Response
	var opts []option.RequestOption
	for k, v := range req.Headers {
		opts = append(opts, option.WithHeader(k, v))
	}
	err = p.client.Post(ctx, "v1/messages", b, &res, opts...)
	stream := ssestream.NewStream[event](ssestream.NewDecoder(res), err)
	defer stream.Close()
	type toolUse struct {
		id, name string
		input    []byte
	}
	var tool *toolUse
	// thinking holds the open thinking block's signature as it arrives.
	var thinking *strings.Builder
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
			switch ev.ContentBlock.Type {
			case "tool_use":
				tool = &toolUse{id: ev.ContentBlock.ID, name: ev.ContentBlock.Name}
			case "thinking":
				thinking = &strings.Builder{}
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
			case "signature_delta":
				if thinking != nil {
					thinking.WriteString(ev.Delta.Signature)
				}
			}
		case "content_block_stop":
			if thinking != nil {
				if sig := thinking.String(); sig != "" {
					if err := emit(llm.Event{Kind: llm.EventReasoning, Signature: sig}); err != nil {
						return err
					}
				}
				thinking = nil
			}
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
		return llm.FromSDK(apiErr.StatusCode, apiErr.Message, apiErr, apiErr.Response, apiErr.RawJSON())
	}
	return llm.FromTransport(err)
}
