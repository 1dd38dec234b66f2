package plugin

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/agentd/agentd/internal/llm"
)

func text(role, s string) llm.Message {
	return llm.Message{Role: role, Content: []llm.Content{{Type: llm.ContentText, Text: s}}}
}

// TestMessagesTransform: experimental.chat.messages.transform sees the
// history as opencode's messages (a call's result in its tool part) and
// what it changes reaches the request (a pruned output, a message taken
// out), while what it leaves alone is the engine's own content (a
// reasoning signature, an image); each step sends the host only the
// messages after those it already holds, and a host that does not hold
// them gets the whole history again.
func TestMessagesTransform(t *testing.T) {
	t.Parallel()
	h := startHost(t, Options{}, "prune.js")
	dir := t.TempDir()
	history := []llm.Message{
		{Role: llm.RoleUser, Content: []llm.Content{{Type: llm.ContentText, Text: "hello"},
			{Type: llm.ContentImage, MediaType: "image/png", Data: "iVBORw0KGgo="}}},
		{Role: llm.RoleAssistant, Content: []llm.Content{{Type: llm.ContentReasoning, Text: "hm", Signature: "sig"},
			{Type: llm.ContentToolCall, CallID: "c1", Name: "echo", Input: json.RawMessage(`{"text":"x"}`)}}},
		{Role: llm.RoleUser, Content: []llm.Content{{Type: llm.ContentToolResult, CallID: "c1", Name: "echo", Text: "PRUNE-ME out"}}},
		text(llm.RoleUser, "DROP-ME"),
		text(llm.RoleAssistant, "fine"),
	}
	step := func(sid string, msgs []llm.Message) []llm.Message {
		t.Helper()
		req := llm.Request{Messages: msgs}
		if err := h.Request(context.Background(), StepInput{SessionID: sid, Directory: dir}, &req); err != nil {
			t.Fatal(err)
		}
		return req.Messages
	}
	got := step("ses_a", history)
	want := []llm.Message{history[0],
		{Role: llm.RoleAssistant, Content: []llm.Content{{Type: llm.ContentReasoning, Text: "hm", Signature: "sig"},
			{Type: llm.ContentToolCall, CallID: "c1", Name: "echo", Input: json.RawMessage(`{"text":"x"}`)}}},
		{Role: llm.RoleUser, Content: []llm.Content{{Type: llm.ContentToolResult, CallID: "c1", Name: "echo", Text: "[pruned]"}}},
		history[4]}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("transformed:\n%+v\nwant\n%+v", got, want)
	}
	sent := h.historySent.Load()
	if sent != 4 { // the call and its result are one message
		t.Errorf("the first step sent %d messages", sent)
	}

	longer := append(append([]llm.Message{}, history...), text(llm.RoleUser, "more"))
	got = step("ses_a", longer)
	if len(got) != 5 || !reflect.DeepEqual(got[4], longer[5]) || got[2].Content[0].Text != "[pruned]" {
		t.Errorf("the next step: %+v", got)
	}
	if n := h.historySent.Load() - sent; n != 1 {
		t.Errorf("the next step sent %d messages, want only the new one", n)
	}

	// A session the host does not hold, though the server thinks it does
	// (the host let it go): the whole history again, the same answer.
	p, err := h.current(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.sent["ses_b"] = p.sent["ses_a"]
	p.mu.Unlock()
	if got := step("ses_b", longer); len(got) != 5 || got[2].Content[0].Text != "[pruned]" {
		t.Errorf("a history the host did not hold: %+v", got)
	}
}
