package fakellm

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/llm/scripted"
)

type oaMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// contentText reads an OpenAI content field: a string or a list of parts.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	out := ""
	for _, p := range parts {
		out += p.Text
	}
	return out
}

func (s *Server) openAIChat(w http.ResponseWriter, r *http.Request) {
	defer s.track(r)()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	var in struct {
		Model    string      `json:"model"`
		Messages []oaMessage `json:"messages"`
		Stream   bool        `json:"stream"`
		Tools    []struct {
			Function struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		badRequest(w, "invalid JSON: "+err.Error())
		return
	}
	if in.Model == "" || len(in.Messages) == 0 {
		badRequest(w, "model and messages are required")
		return
	}
	var req llm.Request
	for _, t := range in.Tools {
		req.Tools = append(req.Tools, llm.ToolSpec{Name: t.Function.Name, Description: t.Function.Description, Schema: t.Function.Parameters})
	}
	for i, m := range in.Messages {
		switch m.Role {
		case "system":
			req.System = append(req.System, contentText(m.Content))
		case "user":
			content, err := oaUserContent(m.Content)
			if err != nil {
				badRequest(w, fmt.Sprintf("messages[%d].%v", i, err))
				return
			}
			req.Messages = append(req.Messages, llm.Message{Role: llm.RoleUser, Content: content})
		case "assistant":
			msg := llm.Message{Role: llm.RoleAssistant}
			if t := contentText(m.Content); t != "" {
				msg.Content = append(msg.Content, llm.Content{Type: llm.ContentText, Text: t})
			}
			for _, tc := range m.ToolCalls {
				msg.Content = append(msg.Content, llm.Content{Type: llm.ContentToolCall, CallID: tc.ID, Name: tc.Function.Name, Input: json.RawMessage(tc.Function.Arguments)})
			}
			req.Messages = append(req.Messages, msg)
		case "tool":
			req.Messages = append(req.Messages, llm.Message{Role: llm.RoleUser, Content: []llm.Content{{Type: llm.ContentToolResult, CallID: m.ToolCallID, Text: contentText(m.Content)}}})
		}
	}
	s.received(&req, body)
	dirs, _ := scripted.Parse(lastUserText(req.Messages))
	attempt := s.attempt(body)
	id := idFor("chatcmpl-")
	created := time.Now().Unix()
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": in.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}

	if !in.Stream {
		var text string
		var calls []any
		var usage llm.Usage
		finish := "stop"
		err := s.run(r.Context(), script{req: req}, attempt, func(ev llm.Event) error {
			switch ev.Kind {
			case llm.EventText:
				text += ev.Text
			case llm.EventToolCall:
				calls = append(calls, map[string]any{"id": ev.CallID, "type": "function", "function": map[string]any{"name": ev.Name, "arguments": string(ev.Input)}})
			case llm.EventFinish:
				usage = ev.Usage
				if ev.Finish == "tool-calls" {
					finish = "tool_calls"
				}
			}
			return nil
		})
		var apiErr *llm.APIError
		if errors.As(err, &apiErr) {
			failStatus(w, apiErr, dirs, false)
			return
		}
		msg := map[string]any{"role": "assistant", "content": text}
		if len(calls) > 0 {
			msg["tool_calls"] = calls
		}
		writeJSON(w, 200, map[string]any{"id": id, "object": "chat.completion", "created": created, "model": in.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
			"usage":   oaUsage(usage)})
		return
	}

	// Errors are decided before the first byte, as real providers do.
	started := false
	var out *sse
	toolIndex := 0
	err = s.run(r.Context(), script{req: req}, attempt, func(ev llm.Event) error {
		if !started {
			started = true
			out = newSSE(w, dirs, attempt)
			if dirs.Malformed {
				if err := out.send("", `{"id": "broken", "choices": [ {"delta": {"content": "oops`); err != nil {
					return err
				}
				return errMalformedSent
			}
			if err := out.send("", chunk(map[string]any{"role": "assistant", "content": ""}, nil)); err != nil {
				return err
			}
		}
		switch ev.Kind {
		case llm.EventText:
			return out.send("", chunk(map[string]any{"content": ev.Text}, nil))
		case llm.EventReasoning:
			return out.send("", chunk(map[string]any{"reasoning_content": ev.Text}, nil))
		case llm.EventToolCall:
			args := string(ev.Input)
			// Split the arguments in two chunks, as real servers stream them.
			half := len(args) / 2
			if err := out.send("", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": toolIndex, "id": ev.CallID, "type": "function",
				"function": map[string]any{"name": ev.Name, "arguments": args[:half]}}}}, nil)); err != nil {
				return err
			}
			err := out.send("", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": toolIndex, "function": map[string]any{"arguments": args[half:]}}}}, nil))
			toolIndex++
			return err
		case llm.EventFinish:
			finish := "stop"
			if ev.Finish == "tool-calls" {
				finish = "tool_calls"
			}
			if err := out.send("", chunk(map[string]any{}, finish)); err != nil {
				return err
			}
			if err := out.send("", map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": in.Model,
				"choices": []any{}, "usage": oaUsage(ev.Usage)}); err != nil {
				return err
			}
			return out.send("", "[DONE]")
		}
		return nil
	})
	var apiErr *llm.APIError
	if errors.As(err, &apiErr) && !started {
		failStatus(w, apiErr, dirs, false)
	}
}

var errMalformedSent = errors.New("malformed chunk sent")

func oaUsage(u llm.Usage) map[string]any {
	return map[string]any{
		"prompt_tokens": u.Input + u.CacheRead, "completion_tokens": u.Output, "total_tokens": u.Input + u.CacheRead + u.Output,
		"prompt_tokens_details":     map[string]any{"cached_tokens": u.CacheRead, "cache_write_tokens": u.CacheWrite},
		"completion_tokens_details": map[string]any{"reasoning_tokens": u.Reasoning},
	}
}
