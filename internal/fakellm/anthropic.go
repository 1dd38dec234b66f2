package fakellm

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/llm/scripted"
)

type anBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	Source    *mediaSource    `json:"source"`
	Title     string          `json:"title"`
}

func (s *Server) anthropicMessages(w http.ResponseWriter, r *http.Request) {
	defer s.track(r)()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	var in struct {
		Model     string          `json:"model"`
		MaxTokens int             `json:"max_tokens"`
		Stream    bool            `json:"stream"`
		System    json.RawMessage `json:"system"`
		Thinking  *struct {
			Type         string `json:"type"`
			BudgetTokens int    `json:"budget_tokens"`
		} `json:"thinking"`
		Tools []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		badRequest(w, "invalid JSON: "+err.Error())
		return
	}
	if in.Model == "" || in.MaxTokens <= 0 || len(in.Messages) == 0 {
		badRequest(w, "model, max_tokens and messages are required")
		return
	}
	var req llm.Request
	if len(in.System) > 0 {
		var str string
		var blocks []anBlock
		if json.Unmarshal(in.System, &str) == nil {
			req.System = []string{str}
		} else if json.Unmarshal(in.System, &blocks) == nil {
			for _, b := range blocks {
				req.System = append(req.System, b.Text)
			}
		}
	}
	for _, t := range in.Tools {
		req.Tools = append(req.Tools, llm.ToolSpec{Name: t.Name, Description: t.Description, Schema: t.InputSchema})
	}
	thinkingOn := in.Thinking != nil && in.Thinking.Type == "enabled"
	if thinkingOn && in.Thinking.BudgetTokens >= in.MaxTokens {
		badRequest(w, "max_tokens must be greater than thinking.budget_tokens")
		return
	}
	for i, m := range in.Messages {
		msg := llm.Message{Role: llm.RoleUser}
		if m.Role == "assistant" {
			msg.Role = llm.RoleAssistant
		}
		var blocks []anBlock
		var str string
		if json.Unmarshal(m.Content, &str) == nil {
			blocks = []anBlock{{Type: "text", Text: str}}
		} else if err := json.Unmarshal(m.Content, &blocks); err != nil {
			badRequest(w, "content: "+err.Error())
			return
		}
		if thinkingOn && m.Role == "assistant" && i == len(in.Messages)-2 && usesTools(blocks) &&
			(blocks[0].Type != "thinking" || blocks[0].Signature == "") {
			// As the API: with thinking on, the assistant turn whose tool
			// results follow must begin with its signed thinking.
			badRequest(w, "messages.assistant.content.0.type: Expected `thinking` or `redacted_thinking`, but found `"+blocks[0].Type+
				"`. When `thinking` is enabled, a final `assistant` message must start with a thinking block.")
			return
		}
		for _, b := range blocks {
			switch b.Type {
			case "thinking":
				msg.Content = append(msg.Content, llm.Content{Type: llm.ContentReasoning, Text: b.Thinking, Signature: b.Signature})
			case "text":
				msg.Content = append(msg.Content, llm.Content{Type: llm.ContentText, Text: b.Text})
			case "tool_use":
				msg.Content = append(msg.Content, llm.Content{Type: llm.ContentToolCall, CallID: b.ID, Name: b.Name, Input: b.Input})
			case "tool_result":
				msg.Content = append(msg.Content, llm.Content{Type: llm.ContentToolResult, CallID: b.ToolUseID, Text: contentText(b.Content), IsError: b.IsError})
			case "image", "document":
				c, err := anMedia(b)
				if err != nil {
					badRequest(w, fmt.Sprintf("messages.%d.content: %v", i, err))
					return
				}
				msg.Content = append(msg.Content, c)
			}
		}
		req.Messages = append(req.Messages, msg)
	}
	s.received(&req, body)
	dirs, _ := scripted.Parse(lastUserText(req.Messages))
	attempt := s.attempt(body)
	id := idFor("msg_fake_")

	if !in.Stream {
		var content []any
		var usage llm.Usage
		stop := "end_turn"
		err := s.run(r.Context(), script{req: req}, attempt, func(ev llm.Event) error {
			switch ev.Kind {
			case llm.EventText:
				if n := len(content); n > 0 {
					if last, ok := content[n-1].(map[string]any); ok && last["type"] == "text" {
						last["text"] = last["text"].(string) + ev.Text
						return nil
					}
				}
				content = append(content, map[string]any{"type": "text", "text": ev.Text})
			case llm.EventToolCall:
				content = append(content, map[string]any{"type": "tool_use", "id": ev.CallID, "name": ev.Name, "input": ev.Input})
			case llm.EventFinish:
				usage = ev.Usage
				if ev.Finish == "tool-calls" {
					stop = "tool_use"
				}
			}
			return nil
		})
		var apiErr *llm.APIError
		if errors.As(err, &apiErr) {
			failStatus(w, apiErr, dirs, true)
			return
		}
		writeJSON(w, 200, map[string]any{"id": id, "type": "message", "role": "assistant", "model": in.Model,
			"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": anUsage(usage)})
		return
	}

	started := false
	var out *sse
	index := 0
	// open is the kind of the block being streamed: "text", "thinking"
	// or "" for none.
	open := ""
	closeBlock := func() error {
		if open == "" {
			return nil
		}
		if open == "thinking" {
			// The API ends a thinking block with its signature.
			if err := out.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": index,
				"delta": map[string]any{"type": "signature_delta", "signature": "fakellm"}}); err != nil {
				return err
			}
		}
		open = ""
		err := out.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
		return err
	}
	// openBlock starts a block of kind unless one is being streamed.
	openBlock := func(kind string, block map[string]any) error {
		if open == kind {
			return nil
		}
		if err := closeBlock(); err != nil {
			return err
		}
		open = kind
		return out.send("content_block_start", map[string]any{"type": "content_block_start", "index": index, "content_block": block})
	}
	err = s.run(r.Context(), script{req: req}, attempt, func(ev llm.Event) error {
		if !started {
			started = true
			out = newSSE(w, dirs, attempt)
			if dirs.Malformed {
				_ = out.send("message_start", `{"type": "message_start", "message": {`)
				return errMalformedSent
			}
			u := anUsage(llm.Usage{})
			if dirs.Usage != nil {
				u = anUsage(*dirs.Usage)
				u["output_tokens"] = 1
			}
			if err := out.send("message_start", map[string]any{"type": "message_start", "message": map[string]any{
				"id": id, "type": "message", "role": "assistant", "model": in.Model, "content": []any{},
				"stop_reason": nil, "stop_sequence": nil, "usage": u}}); err != nil {
				return err
			}
		}
		switch ev.Kind {
		case llm.EventReasoning:
			if err := openBlock("thinking", map[string]any{"type": "thinking", "thinking": ""}); err != nil {
				return err
			}
			return out.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": index,
				"delta": map[string]any{"type": "thinking_delta", "thinking": ev.Text}})
		case llm.EventText:
			if err := openBlock("text", map[string]any{"type": "text", "text": ""}); err != nil {
				return err
			}
			return out.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": index,
				"delta": map[string]any{"type": "text_delta", "text": ev.Text}})
		case llm.EventToolCall:
			if err := closeBlock(); err != nil {
				return err
			}
			if err := out.send("content_block_start", map[string]any{"type": "content_block_start", "index": index,
				"content_block": map[string]any{"type": "tool_use", "id": ev.CallID, "name": ev.Name, "input": map[string]any{}}}); err != nil {
				return err
			}
			args := string(ev.Input)
			half := len(args) / 2
			for _, piece := range []string{args[:half], args[half:]} {
				if err := out.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": index,
					"delta": map[string]any{"type": "input_json_delta", "partial_json": piece}}); err != nil {
					return err
				}
			}
			err := out.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
			index++
			return err
		case llm.EventFinish:
			if err := closeBlock(); err != nil {
				return err
			}
			stop := "end_turn"
			if ev.Finish == "tool-calls" {
				stop = "tool_use"
			}
			if err := out.send("message_delta", map[string]any{"type": "message_delta",
				"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": anUsage(ev.Usage)}); err != nil {
				return err
			}
			return out.send("message_stop", map[string]any{"type": "message_stop"})
		}
		return nil
	})
	var apiErr *llm.APIError
	if errors.As(err, &apiErr) && !started {
		failStatus(w, apiErr, dirs, true)
	}
}

func anUsage(u llm.Usage) map[string]any {
	return map[string]any{"input_tokens": u.Input, "output_tokens": u.Output,
		"cache_read_input_tokens": u.CacheRead, "cache_creation_input_tokens": u.CacheWrite}
}

// usesTools reports whether an assistant turn calls a tool.
func usesTools(blocks []anBlock) bool {
	for _, b := range blocks {
		if b.Type == "tool_use" {
			return true
		}
	}
	return false
}
