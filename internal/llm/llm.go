// Package llm is the boundary between the agent loop and model providers:
// a provider-neutral request, a stream of events, and the errors the loop
// needs to decide between retrying and failing.
package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentd/agentd/internal/core"
)

// Roles in a conversation sent to a model.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Content kinds.
const (
	ContentText       = "text"
	ContentToolCall   = "tool_call"
	ContentToolResult = "tool_result"
	// ContentReasoning is the model's reasoning of an earlier step, sent
	// back only to the provider that signed it (Anthropic requires the
	// thinking of a tool-use turn back with the tool results).
	ContentReasoning = "reasoning"
	// ContentImage is a picture the model looks at and ContentDocument a
	// PDF it reads, both attached by the user (see Media).
	ContentImage    = "image"
	ContentDocument = "document"
)

// Content is one block of a message.
type Content struct {
	Type    string
	Text    string
	CallID  string
	Name    string
	Input   json.RawMessage
	IsError bool
	// Signature is the provider's signature of a ContentReasoning block.
	Signature string
	// MediaType, Data (base64, as a data: URL holds it) or URL (an image
	// on the web), and Filename describe a ContentImage or a
	// ContentDocument.
	MediaType string
	Data      string
	URL       string
	Filename  string
	// PartID is the id of the record's part this block was made from (""
	// for none). Providers never send it: plugins that see the history
	// as opencode's messages match it with the session's record.
	PartID string
	// Part is what else the record's part held that plugins read (nil
	// for a block the server made up). Providers never send it, and it
	// is no part of the view's JSON (the engine's CheckHistory compares
	// what the model is sent).
	Part *PartInfo `json:"-"`
}

// PartInfo is what a block's record part held beyond the block, for the
// plugins that see the history as opencode's parts: a text's synthetic
// flag and metadata, a tool call's title and metadata, and the part's
// times (a tool call's: its state's). Its maps are the record's, shared:
// read them, never change them.
type PartInfo struct {
	Synthetic bool
	Title     string
	Metadata  map[string]any
	Time      core.PartTime
}

// Message is one turn of the conversation.
type Message struct {
	Role    string
	Content []Content
	// From is the record's message this turn was made from (a copy; nil
	// for a turn the server made up). Providers never send it: plugins
	// that see the history as opencode's messages get its id and fields.
	From *core.Message
}

// ToolSpec describes a tool the model may call.
type ToolSpec struct {
	Name        string
	Description string
	Schema      json.RawMessage
}

// Request is one model call.
type Request struct {
	Model string
	// System is the system prompt in blocks, the most stable first, so
	// that providers with prompt caching can cache the prefix.
	System    []string
	Messages  []Message
	Tools     []ToolSpec
	MaxTokens int
	// Temperature and TopP are sent when set.
	Temperature *float64
	TopP        *float64
	// Options are provider-specific settings (opencode's model options and
	// the chosen variant's), e.g. reasoningEffort or thinking.
	Options map[string]any
	// Headers are sent with the request besides the provider's own (a
	// plugin's chat.headers).
	Headers map[string]string
	// Purpose names what the call is for when it is not a step of a run
	// (PurposeTitle, PurposeSummary); the offline models answer by it.
	Purpose string
	// Attempt is 1 for the first try of a step and grows with each retry.
	Attempt int
	// ToolChoice is ToolChoiceRequired when the model must call a tool
	// ("" lets it choose).
	ToolChoice string
	// Directory is the session's directory, set by the plugins' hooks
	// (package plugin) and the title writer for a provider whose plugin
	// auth loader is made per directory; "" elsewhere.
	Directory string
}

// ToolChoiceRequired makes the model call one of the tools (opencode's
// structured output asks for it).
const ToolChoiceRequired = "required"

// Purposes of calls that are not steps of a run.
const (
	PurposeTitle   = "title"
	PurposeSummary = "summary"
)

// SystemText joins the system blocks, for providers that take one string.
func (r Request) SystemText() string {
	out := ""
	for _, b := range r.System {
		if b == "" {
			continue
		}
		if out != "" {
			out += "\n\n"
		}
		out += b
	}
	return out
}

// Event kinds emitted by a stream.
const (
	EventText      = "text"
	EventReasoning = "reasoning"
	EventToolCall  = "tool_call"
	EventFinish    = "finish"
)

// Usage is token accounting for one call.
type Usage struct {
	Input      int64
	Output     int64
	Reasoning  int64
	CacheRead  int64
	CacheWrite int64
}

// Event is one streamed item. Text and reasoning come as deltas; a tool call
// arrives whole; finish closes the stream with usage and a reason.
type Event struct {
	Kind   string
	Text   string
	CallID string
	Name   string
	Input  json.RawMessage
	Usage  Usage
	Finish string
	// Signature, on an EventReasoning without text, signs the reasoning
	// streamed since the last one (Anthropic's thinking blocks).
	Signature string
}

// Provider streams one model call. It calls emit for each event in order
// and returns when the stream ends. An *APIError describes a provider
// failure; context errors mean the call was cancelled.
type Provider interface {
	Stream(ctx context.Context, req Request, emit func(Event) error) error
}

// APIError is a failure reported by (or on the way to) a provider.
type APIError struct {
	Message    string
	StatusCode int
	Retryable  bool
	// RetryAfter is the provider's requested delay, 0 when it gave none.
	RetryAfter time.Duration
	Headers    map[string]string
	Body       string
	// Auth marks authentication and authorisation failures.
	Auth bool
	// ContextOverflow marks a request the model refused because it does
	// not fit its context window.
	ContextOverflow bool
	// MaxAttempts, when above 0, bounds the tries of a call failing this
	// way below the engine's own policy (a refused connection).
	MaxAttempts int
}

func (e *APIError) Error() string {
	if e.StatusCode != 0 {
		return fmt.Sprintf("provider error %d: %s", e.StatusCode, e.Message)
	}
	return "provider error: " + e.Message
}

// RetryableStatus reports whether an HTTP status is worth retrying.
func RetryableStatus(code int) bool {
	return code == 408 || code == 409 || code == 429 || code >= 500
}
