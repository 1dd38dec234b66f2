package anthropic

import (
	"encoding/json"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/internal/llm"
)

// sdkParams is the request as the SDK's own types build it: the reference
// the hand-encoded body must equal.
func sdkParams(p *Provider, req llm.Request) sdk.MessageNewParams {
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
			case llm.ContentReasoning:
				if c.Signature != "" {
					blocks = append(blocks, sdk.NewThinkingBlock(c.Signature, c.Text))
				}
			case llm.ContentImage:
				if c.URL != "" {
					blocks = append(blocks, sdk.NewImageBlock(sdk.URLImageSourceParam{URL: c.URL}))
				} else {
					blocks = append(blocks, sdk.NewImageBlockBase64(c.MediaType, c.Data))
				}
			case llm.ContentDocument:
				doc := sdk.NewDocumentBlock(sdk.Base64PDFSourceParam{Data: c.Data})
				if c.Filename != "" {
					doc.OfDocument.Title = sdk.String(c.Filename)
				}
				blocks = append(blocks, doc)
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
	if req.ToolChoice == llm.ToolChoiceRequired && len(req.Tools) > 0 {
		params.ToolChoice = sdk.ToolChoiceUnionParam{OfAny: &sdk.ToolChoiceAnyParam{}}
	}
	return params
}

// sdkBody is what the SDK's NewStreaming sent for req, sampling options
// set on top as the provider did.
func sdkBody(t testing.TB, p *Provider, req llm.Request) []byte {
	b, err := json.Marshal(sdkParams(p, req))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["stream"] = true
	// The one deliberate difference: a tool whose schema has no
	// properties still sends one, which the API requires.
	if tools, ok := m["tools"].([]any); ok {
		for _, t := range tools {
			if t := t.(map[string]any); t["input_schema"] == nil {
				t["input_schema"] = map[string]any{"type": "object"}
			}
		}
	}
	if req.Temperature != nil {
		m["temperature"] = *req.Temperature
	}
	if req.TopP != nil {
		m["top_p"] = *req.TopP
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func text(s string) llm.Content { return llm.Content{Type: llm.ContentText, Text: s} }

// requests covers every kind of content and option the body encodes.
func requests() map[string]llm.Request {
	temp, topP := 0.2, 0.9
	schema := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"a <path> & more"}},"required":["path"]}`)
	return map[string]llm.Request{
		"one user message": {Model: "claude-x", Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Content{text("hi")}}}},
		"system, options, tools": {
			Model: "claude-x", System: []string{"You are agentd.", "", "Be brief."}, MaxTokens: 512, Temperature: &temp, TopP: &topP,
			Tools: []llm.ToolSpec{{Name: "read", Description: "Reads a file.", Schema: schema},
				{Name: "noargs", Description: "", Schema: json.RawMessage(`{"type":"object"}`)},
				{Name: "broken", Description: "d", Schema: json.RawMessage(`{"type":`)}},
			Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Content{text("a"), text(""), text("b <i>&</i> \u2028")}}},
		},
		"a tool required": {Model: "m", ToolChoice: llm.ToolChoiceRequired, Tools: []llm.ToolSpec{{Name: "read", Description: "d", Schema: schema}},
			Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Content{text("x")}}}},
		"thinking raises max tokens": {Model: "m", MaxTokens: 1000, Options: map[string]any{"thinking": map[string]any{"type": "enabled", "budgetTokens": 2000.0}},
			Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Content{text("think")}}}},
		"tool round trip": {Model: "m", Messages: []llm.Message{
			{Role: llm.RoleUser, Content: []llm.Content{text("list it")}},
			{Role: llm.RoleAssistant, Content: []llm.Content{
				{Type: llm.ContentReasoning, Text: "I should list it.", Signature: "sig-1"},
				{Type: llm.ContentReasoning, Text: "unsigned reasoning is not sent back"},
				text("Looking"),
				{Type: llm.ContentToolCall, CallID: "toolu_1", Name: "list", Input: json.RawMessage(`{"path":".","deep":{"a":[1,2]}}`)},
				{Type: llm.ContentToolCall, CallID: "toolu_2", Name: "noargs"},
				{Type: llm.ContentToolCall, CallID: "toolu_3", Name: "bad", Input: json.RawMessage(`{"unfinished":`)}}},
			{Role: llm.RoleUser, Content: []llm.Content{{Type: llm.ContentToolResult, CallID: "toolu_1", Text: "a\nb"},
				{Type: llm.ContentToolResult, CallID: "toolu_2", Text: "failed", IsError: true},
				{Type: llm.ContentToolResult, CallID: "toolu_3", Text: ""}, text("and then?")}},
			{Role: llm.RoleAssistant, Content: []llm.Content{text("done")}},
			{Role: llm.RoleAssistant},
		}},
		// Pictures are image blocks and PDFs document blocks, in their
		// place among the text; the last takes the cache breakpoint.
		"an image and a PDF": {Model: "m", Messages: []llm.Message{
			{Role: llm.RoleUser, Content: []llm.Content{text("look at"),
				{Type: llm.ContentImage, MediaType: "image/png", Data: "iVBORw0KGgo=", Filename: "shot.png"},
				{Type: llm.ContentImage, MediaType: "image/jpeg", URL: "https://example.com/a.jpg"},
				text("and read"),
				{Type: llm.ContentDocument, MediaType: "application/pdf", Data: "JVBERi0=", Filename: "spec.pdf"}}},
			{Role: llm.RoleAssistant, Content: []llm.Content{text("seen")}},
			{Role: llm.RoleUser, Content: []llm.Content{text("again"),
				{Type: llm.ContentDocument, MediaType: "application/pdf", Data: "JVBERi0="}}},
		}},
		"ends with thinking": {Model: "m", Messages: []llm.Message{
			{Role: llm.RoleUser, Content: []llm.Content{text("go on")}},
			{Role: llm.RoleAssistant, Content: []llm.Content{{Type: llm.ContentReasoning, Text: "hmm", Signature: "sig-2"}}},
		}},
	}
}

// The body agentd encodes is, as JSON, what the SDK's types would send.
func TestBodyEqualsSDKEncoding(t *testing.T) {
	t.Parallel()
	p := New(Options{})
	for name, req := range requests() {
		t.Run(name, func(t *testing.T) {
			got, err := p.body(req)
			if err != nil {
				t.Fatal(err)
			}
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(sdkBody(t, p, req), &w); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(w, g); d != "" {
				t.Errorf("body differs from the SDK's (-sdk +agentd):\n%s", d)
			}
		})
	}
}

func BenchmarkEvent(b *testing.B) {
	data := []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"word "}}`)
	b.Run("agentd", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var ev event
			if err := json.Unmarshal(data, &ev); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sdk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var ev sdk.MessageStreamEventUnion
			if err := json.Unmarshal(data, &ev); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkBody(b *testing.B) {
	p := New(Options{})
	req := requests()["tool round trip"]
	req.System = []string{"You are a coding agent. " + string(make([]byte, 0, 4000))}
	for i := range 12 {
		req.Tools = append(req.Tools, llm.ToolSpec{Name: "tool" + string(rune('a'+i)), Description: "Does a thing with files and directories, carefully.",
			Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"The path."},"limit":{"type":"integer"}},"required":["path"]}`)})
	}
	b.Run("agentd", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := p.body(req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sdk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(sdkParams(p, req)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
