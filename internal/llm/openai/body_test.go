package openai

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentd/agentd/internal/llm"
)

// sdkParams is the request as the SDK's own types build it: the reference
// the hand-encoded body must equal.
func sdkParams(req llm.Request) sdk.ChatCompletionNewParams {
	var msgs []sdk.ChatCompletionMessageParamUnion
	if sys := req.SystemText(); sys != "" {
		msgs = append(msgs, sdk.SystemMessage(sys))
	}
	for _, m := range req.Messages {
		switch m.Role {
		case llm.RoleUser:
			var text string
			var parts []sdk.ChatCompletionContentPartUnionParam
			media := false
			for _, c := range m.Content {
				switch c.Type {
				case llm.ContentText:
					if text != "" {
						text += "\n"
					}
					text += c.Text
					if c.Text != "" {
						parts = append(parts, sdk.TextContentPart(c.Text))
					}
				case llm.ContentToolResult:
					msgs = append(msgs, sdk.ToolMessage(c.Text, c.CallID))
				case llm.ContentImage:
					media = true
					url := c.URL
					if url == "" {
						url = "data:" + c.MediaType + ";base64," + c.Data
					}
					parts = append(parts, sdk.ImageContentPart(sdk.ChatCompletionContentPartImageImageURLParam{URL: url}))
				case llm.ContentDocument:
					media = true
					parts = append(parts, sdk.FileContentPart(sdk.ChatCompletionContentPartFileFileParam{
						FileData: sdk.String("data:" + c.MediaType + ";base64," + c.Data), Filename: sdk.String(c.Filename)}))
				}
			}
			switch {
			case media:
				msgs = append(msgs, sdk.UserMessage(parts))
			case text != "":
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
	if req.ToolChoice == llm.ToolChoiceRequired && len(req.Tools) > 0 {
		p.ToolChoice = sdk.ChatCompletionToolChoiceOptionUnionParam{OfAuto: sdk.String("required")}
	}
	return p
}

// sdkBody is what the SDK's NewStreaming sends for req.
func sdkBody(t testing.TB, req llm.Request) []byte {
	b, err := sdkParams(req).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["stream"] = true
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
		"one user message": {Model: "gpt-x", Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Content{text("hi")}}}},
		"system, options, tools": {
			Model: "gpt-x", System: []string{"You are agentd.", "", "Be brief."}, MaxTokens: 512, Temperature: &temp, TopP: &topP,
			Options: map[string]any{"reasoningEffort": "high"},
			Tools: []llm.ToolSpec{{Name: "read", Description: "Reads a file.", Schema: schema},
				{Name: "noargs", Description: "", Schema: nil}},
			Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Content{text("a"), text("b <i>&</i> \u2028")}}},
		},
		"tool round trip": {Model: "m", Messages: []llm.Message{
			{Role: llm.RoleUser, Content: []llm.Content{text("list it")}},
			{Role: llm.RoleAssistant, Content: []llm.Content{text("Looking"), text("."),
				{Type: llm.ContentToolCall, CallID: "call_1", Name: "list", Input: json.RawMessage(`{"path":"."}`)},
				{Type: llm.ContentToolCall, CallID: "call_2", Name: "noargs"}}},
			{Role: llm.RoleUser, Content: []llm.Content{{Type: llm.ContentToolResult, CallID: "call_1", Text: "a\nb"},
				{Type: llm.ContentToolResult, CallID: "call_2", Text: ""}, text("and then?")}},
			{Role: llm.RoleAssistant, Content: []llm.Content{text("done")}},
			{Role: llm.RoleAssistant},
		}},
		"a tool schema that is not JSON": {Model: "m", Tools: []llm.ToolSpec{{Name: "broken", Description: "d", Schema: json.RawMessage(`{"type":`)},
			{Name: "fine", Description: "d", Schema: schema}},
			Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Content{text("x")}}}},
		"a tool required": {Model: "m", ToolChoice: llm.ToolChoiceRequired, Tools: []llm.ToolSpec{{Name: "fine", Description: "d", Schema: schema}},
			Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Content{text("x")}}}},
		// Pictures and documents make the user's content a list of parts,
		// in their place among the text.
		"an image and a PDF": {Model: "m", Messages: []llm.Message{
			{Role: llm.RoleUser, Content: []llm.Content{text("look at"),
				{Type: llm.ContentImage, MediaType: "image/png", Data: "iVBORw0KGgo=", Filename: "shot.png"},
				text(""), text("and read"),
				{Type: llm.ContentDocument, MediaType: "application/pdf", Data: "JVBERi0=", Filename: "spec.pdf"},
				{Type: llm.ContentImage, MediaType: "image/jpeg", URL: "https://example.com/a.jpg"}}},
			{Role: llm.RoleAssistant, Content: []llm.Content{text("seen")}},
		}},
		"effort empty, max tokens negative": {Model: "m", MaxTokens: -1, Options: map[string]any{"reasoningEffort": ""},
			Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Content{text("x")}}}},
	}
}

// The body agentd encodes is, as JSON, what the SDK's types would send.
func TestBodyEqualsSDKEncoding(t *testing.T) {
	t.Parallel()
	for name, req := range requests() {
		t.Run(name, func(t *testing.T) {
			got, err := body(req)
			if err != nil {
				t.Fatal(err)
			}
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(sdkBody(t, req), &w); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(w, g); d != "" {
				t.Errorf("body differs from the SDK's (-sdk +agentd):\n%s", d)
			}
		})
	}
}

func BenchmarkBody(b *testing.B) {
	req := benchRequest()
	b.Run("agentd", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := body(req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sdk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := sdkParams(req).MarshalJSON(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchRequest is a third step of a tool conversation with a dozen tools.
func benchRequest() llm.Request {
	req := requests()["tool round trip"]
	req.System = []string{"You are a coding agent. " + string(make([]byte, 0, 4000))}
	for i := range 12 {
		req.Tools = append(req.Tools, llm.ToolSpec{Name: "tool" + string(rune('a'+i)), Description: "Does a thing with files and directories, carefully.",
			Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"The path."},"limit":{"type":"integer"}},"required":["path"]}`)})
	}
	return req
}

func BenchmarkChunk(b *testing.B) {
	data := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1764800000,"model":"fake-model","choices":[{"index":0,"delta":{"content":"word "},"finish_reason":null}]}`)
	b.Run("agentd", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var c chunk
			if err := json.Unmarshal(data, &c); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sdk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var c sdk.ChatCompletionChunk
			if err := json.Unmarshal(data, &c); err != nil {
				b.Fatal(err)
			}
		}
	})
}
