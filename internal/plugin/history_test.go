package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
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

// BenchmarkMessagesTransform is one step's
// experimental.chat.messages.transform with a history of 200 messages of
// 5 KiB (1 MiB), whose last two are new at each step: sent as a change
// (what agentd does) and, for comparison, whole every step.
func BenchmarkMessagesTransform(b *testing.B) {
	for _, whole := range []bool{false, true} {
		name := "change"
		if whole {
			name = "whole"
		}
		b.Run(name, func(b *testing.B) {
			h := startHost(b, Options{}, "prune.js")
			dir := b.TempDir()
			var history []llm.Message
			step := 0
			grow := func() {
				step++
				history = append(history, text(llm.RoleUser, fmt.Sprintf("%d %s", step, strings.Repeat("u", 5<<10))),
					text(llm.RoleAssistant, fmt.Sprintf("%d %s", step, strings.Repeat("a", 5<<10))))
			}
			for range 100 {
				grow()
			}
			p, err := h.current(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			pid := h.Pid()
			host0, self0 := procTicks(pid), selfCPU()
			for b.Loop() {
				grow()
				if whole {
					p.mu.Lock()
					clear(p.sent)
					p.mu.Unlock()
				}
				req := llm.Request{Messages: history}
				if err := h.Request(context.Background(), StepInput{SessionID: "ses_b", Directory: dir}, &req); err != nil {
					b.Fatal(err)
				}
				history = history[:len(history)-2] // the same size each step, its last two new
			}
			b.ReportMetric(float64(procTicks(pid)-host0)*10/float64(b.N)*1000, "host-cpu-µs/op")
			b.ReportMetric(float64(selfCPU()-self0)/float64(b.N)/1e3, "server-cpu-µs/op")
		})
	}
}
