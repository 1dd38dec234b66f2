// Package openai is the provider for OpenAI Chat Completions and every
// compatible endpoint (OpenRouter, vLLM, llama.cpp, LM Studio, Ollama …),
// through the official openai-go SDK with its own retries off: agentd
// retries itself, visibly.
package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

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

// The request and the stream's chunks are encoded and decoded here, with
// encoding/json and structs that hold only what agentd sends and reads;
// the SDK still builds, authenticates and sends the request, maps its
// errors and splits the stream into events. Its own types encode and
// decode by reflection over every field of the API, in several passes:
// 13 % of the server's CPU with 1,000 busy sessions. A test holds the
// body equal to what the SDK's types would send.

// chatRequest is the body of a streamed chat completion.
type chatRequest struct {
	Model           string         `json:"model"`
	Messages        []chatMessage  `json:"messages"`
	Stream          bool           `json:"stream"`
	StreamOptions   streamOptions  `json:"stream_options"`
	MaxTokens       int            `json:"max_tokens,omitempty"`
	Temperature     *float64       `json:"temperature,omitempty"`
	TopP            *float64       `json:"top_p,omitempty"`
	ReasoningEffort string         `json:"reasoning_effort,omitempty"`
	Tools           []chatFunction `json:"tools,omitempty"`
	ToolChoice      string         `json:"tool_choice,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Role string `json:"role"`
	// Content is a *string, or a user's []contentPart when the message
	// holds pictures or documents.
	Content    any        `json:"content,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	ToolCalls  []toolCall `json:"tool_calls,omitempty"`
}

// contentPart is one part of a user message that holds pictures or
// documents: text, an image (image_url, a data: URL for attached data) or
// a file (a PDF, as a data: URL).
type contentPart struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	ImageURL *imageURL `json:"image_url,omitempty"`
	File     *fileData `json:"file,omitempty"`
}

type imageURL struct {
	URL string `json:"url"`
}

type fileData struct {
	FileData string `json:"file_data"`
	Filename string `json:"filename"`
}

type toolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function callFunction `json:"function"`
}

type callFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type chatFunction struct {
	Type     string     `json:"type"`
	Function definition `json:"function"`
}

type definition struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// body encodes req as a streamed chat completion request.
func body(req llm.Request) ([]byte, error) {
	r := chatRequest{Model: req.Model, Stream: true, StreamOptions: streamOptions{IncludeUsage: true},
		Temperature: req.Temperature, TopP: req.TopP}
	if req.MaxTokens > 0 {
		r.MaxTokens = req.MaxTokens
	}
	r.Messages = make([]chatMessage, 0, len(req.Messages)+1)
	if sys := req.SystemText(); sys != "" {
		r.Messages = append(r.Messages, chatMessage{Role: "system", Content: &sys})
	}
	for _, m := range req.Messages {
		switch m.Role {
		case llm.RoleUser:
			r.Messages = appendUser(r.Messages, m.Content)
		case llm.RoleAssistant:
			a := chatMessage{Role: "assistant"}
			var text strings.Builder
			for _, c := range m.Content {
				switch c.Type {
				case llm.ContentText:
					text.WriteString(c.Text)
				case llm.ContentToolCall:
					args := string(c.Input)
					if args == "" {
						args = "{}"
					}
					a.ToolCalls = append(a.ToolCalls, toolCall{ID: c.CallID, Type: "function",
						Function: callFunction{Name: c.Name, Arguments: args}})
				}
			}
			if text.Len() > 0 {
				s := text.String()
				a.Content = &s
			}
			r.Messages = append(r.Messages, a)
		}
	}
	// opencode's key for OpenAI's reasoning effort.
	if effort, ok := req.Options["reasoningEffort"].(string); ok {
		r.ReasoningEffort = effort
	}
	for _, t := range req.Tools {
		r.Tools = append(r.Tools, chatFunction{Type: "function",
			Function: definition{Name: t.Name, Description: t.Description, Parameters: t.Schema}})
	}
	if req.ToolChoice == llm.ToolChoiceRequired && len(r.Tools) > 0 {
		r.ToolChoice = "required"
	}
	b, err := llm.EncodeBody(r, func() {
		// A tool whose schema is not JSON is offered without one, as the
		// SDK's types did, rather than fail every step.
		for i := range r.Tools {
			if !json.Valid(r.Tools[i].Function.Parameters) {
				r.Tools[i].Function.Parameters = nil
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("encode chat request: %w", err)
	}
	return b, nil
}

// appendUser appends a user turn: the tool results it carries, each a
// message of its own, then its text — one string, or a list of parts when
// it holds pictures or documents, which keeps them in their place among
// the text.
func appendUser(msgs []chatMessage, content []llm.Content) []chatMessage {
	var text strings.Builder
	media := false
	for _, c := range content {
		switch c.Type {
		case llm.ContentText:
			if text.Len() > 0 {
				text.WriteByte('\n')
			}
			text.WriteString(c.Text)
		case llm.ContentToolResult:
			msgs = append(msgs, chatMessage{Role: "tool", Content: &c.Text, ToolCallID: c.CallID})
		case llm.ContentImage, llm.ContentDocument:
			media = true
		}
	}
	if media {
		return append(msgs, chatMessage{Role: "user", Content: contentParts(content)})
	}
	if text.Len() > 0 {
		s := text.String()
		msgs = append(msgs, chatMessage{Role: "user", Content: &s})
	}
	return msgs
}

// contentParts is a user turn's text, pictures and documents as parts.
func contentParts(content []llm.Content) []contentPart {
	var parts []contentPart
	for _, c := range content {
		switch c.Type {
		case llm.ContentText:
			if c.Text != "" {
				parts = append(parts, contentPart{Type: "text", Text: c.Text})
			}
		case llm.ContentImage:
			parts = append(parts, contentPart{Type: "image_url", ImageURL: &imageURL{URL: mediaURL(c)}})
		case llm.ContentDocument:
			name := c.Filename
			if name == "" {
				name = "document.pdf"
			}
			parts = append(parts, contentPart{Type: "file", File: &fileData{FileData: mediaURL(c), Filename: name}})
		}
	}
	return parts
}

// mediaURL is how the API takes a picture or a document: its web address,
// or its data as a data: URL.
func mediaURL(c llm.Content) string {
	if c.URL != "" {
		return c.URL
	}
	return "data:" + c.MediaType + ";base64," + c.Data
}

// chunk is what agentd reads of one streamed chunk.
type chunk struct {
	Choices []struct {
		Delta struct {
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
			ToolCalls        []struct {
				Index    int64        `json:"index"`
				ID       string       `json:"id"`
				Function callFunction `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int64 `json:"prompt_tokens"`
		CompletionTokens    int64 `json:"completion_tokens"`
		PromptTokensDetails struct {
			CachedTokens     int64 `json:"cached_tokens"`
			CacheWriteTokens int64 `json:"cache_write_tokens"`
		} `json:"prompt_tokens_details"`
		CompletionTokensDetails struct {
			ReasoningTokens int64 `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	} `json:"usage"`
}

// Stream implements llm.Provider.
func (p *Provider) Stream(ctx context.Context, req llm.Request, emit func(llm.Event) error) error {
	b, err := body(req)
	if err != nil {
		return err
	}
	var res *http.Response
	// The empty params encode as {}; the body option replaces them, and
	// the response is left unread for the stream.
	_, err = p.chat.New(ctx, sdk.ChatCompletionNewParams{}, requestOptions(req, b, &res)...)
	stream := ssestream.NewStream[chunk](ssestream.NewDecoder(res), err)
	defer stream.Close()
	type call struct {
		id, name string
		args     []byte
	}
	calls := map[int64]*call{}
	var usage llm.Usage
	finish := ""
	for stream.Next() {
		c := stream.Current()
		if u := c.Usage; u != nil {
			usage = llm.Usage{Input: u.PromptTokens - u.PromptTokensDetails.CachedTokens, Output: u.CompletionTokens,
				Reasoning: u.CompletionTokensDetails.ReasoningTokens, CacheRead: u.PromptTokensDetails.CachedTokens,
				CacheWrite: u.PromptTokensDetails.CacheWriteTokens}
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != "" {
				if err := emit(llm.Event{Kind: llm.EventText, Text: ch.Delta.Content}); err != nil {
					return err
				}
			}
			if ch.Delta.ReasoningContent != "" {
				if err := emit(llm.Event{Kind: llm.EventReasoning, Text: ch.Delta.ReasoningContent}); err != nil {
					return err
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
		return llm.FromSDK(apiErr.StatusCode, apiErr.Message, apiErr, apiErr.Response, apiErr.RawJSON())
	}
	return llm.FromTransport(err)
}

// requestOptions send body as is, leave the response unread for the
// stream, and add the request's own headers (a plugin's chat.headers).
func requestOptions(req llm.Request, body []byte, res **http.Response) []option.RequestOption {
	opts := []option.RequestOption{option.WithRequestBody("application/json", body), option.WithResponseBodyInto(res)}
	for k, v := range req.Headers {
		opts = append(opts, option.WithHeader(k, v))
	}
	return opts
}
