package scripted

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentd/agentd/internal/llm"
)

func FuzzParse(f *testing.F) {
	for _, s := range []string{"reply:hi", "sleep:1.5\nreply:x", "fail:429x2", "fail:600", "tool:echo:{\"a\":1}", "loop:x:", "tool::", "sleep:-1", "plain text", "reasoning:hm\nreply:ok"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := Parse(s)
		if err != nil {
			return
		}
		if d.Sleep < 0 || d.Sleep > 3600 {
			t.Fatalf("sleep %v accepted", d.Sleep)
		}
		if d.Think < 0 || d.Think > 600 {
			t.Fatalf("think %v accepted", d.Think)
		}
		if d.FailCode != 0 && (d.FailCode < 400 || d.FailCode > 599) {
			t.Fatalf("fail code %d accepted", d.FailCode)
		}
		// The model answers every parsable prompt without panicking.
		m := &Model{Second: 1}
		req := llm.Request{Attempt: 1, Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Content{{Type: llm.ContentText, Text: s}}}}}
		if d.Sleep > 0.01 {
			return
		}
		_ = m.Stream(context.Background(), req, func(llm.Event) error { return nil })
	})
}

func TestDirectives(t *testing.T) {
	t.Parallel()
	d, err := Parse("fail:503x2\ntool:echo:{\"text\":\"a\"}\nreply:done")
	if err != nil || d.FailCode != 503 || d.FailTimes != 2 || len(d.Tools) != 1 || d.Reply != "done" {
		t.Fatalf("parse = %+v, %v", d, err)
	}
	for _, bad := range []string{"fail:200", "fail:500x0", "sleep:abc", "tool:x:{bad", "tool::{}"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
	d, _ = Parse("just chatting")
	if d.Echo != "just chatting" {
		t.Errorf("echo = %q", d.Echo)
	}
	var text strings.Builder
	m := &Model{}
	err = m.Stream(context.Background(), llm.Request{Attempt: 3, Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Content{{Type: llm.ContentText, Text: "fail:503x2\nreply:ok now"}}}}},
		func(ev llm.Event) error { text.WriteString(ev.Text); return nil })
	if err != nil || text.String() != "ok now" {
		t.Errorf("third attempt = %q, %v", text.String(), err)
	}
}

func TestParseQuotedLine(t *testing.T) {
	t.Parallel()
	d, err := Parse(`"tool:bash:{\"command\":\"echo hi there\"}"` + "\n" + `"reply:hello world"`)
	if err != nil {
		t.Fatal(err)
	}
	if d.Reply != "hello world" || len(d.Tools) != 1 || string(d.Tools[0].Input) != `{"command":"echo hi there"}` {
		t.Fatalf("directives = %+v", d)
	}
}

// think: delays every step of a conversation, tool steps included, by its
// time and no more.
func TestThinkDelaysEveryStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &Model{}
		prompt := llm.Message{Role: llm.RoleUser, Content: []llm.Content{{Type: llm.ContentText, Text: "think:1.5\ntool:list:{}\nreply:done"}}}
		call := llm.Message{Role: llm.RoleAssistant, Content: []llm.Content{{Type: llm.ContentToolCall, CallID: "c1", Name: "list", Input: []byte("{}")}}}
		result := llm.Message{Role: llm.RoleUser, Content: []llm.Content{{Type: llm.ContentToolResult, CallID: "c1", Text: "a"}}}
		for _, msgs := range [][]llm.Message{{prompt}, {prompt, call, result}} {
			start := time.Now()
			if err := m.Stream(t.Context(), llm.Request{Attempt: 1, Messages: msgs}, func(llm.Event) error { return nil }); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d != 1500*time.Millisecond {
				t.Errorf("step after %d messages took %v, want 1.5s", len(msgs), d)
			}
		}
	})
}

// TestRetryAfterAsksForTheDelay: a fail: answer with retryafter:S asks
// for S seconds, as a provider's Retry-After header does, so that an
// in-process retry waits that long (the dashboard's test shows a retry
// due in minutes; without it the retry came every 2-4 s and the test read
// its row in the moment it was due).
func TestRetryAfterAsksForTheDelay(t *testing.T) {
	t.Parallel()
	for prompt, want := range map[string]time.Duration{
		"fail:503\nretryafter:300": 300 * time.Second, "fail:429\nretryafter:0.5": 500 * time.Millisecond,
		"fail:503": 0, "fail:503\nretryafter:soon": 0,
	} {
		err := (&Model{}).Stream(context.Background(), llm.Request{Attempt: 1,
			Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Content{{Type: llm.ContentText, Text: prompt}}}}},
			func(llm.Event) error { return nil })
		var ae *llm.APIError
		if !errors.As(err, &ae) || ae.RetryAfter != want || !ae.Retryable {
			t.Errorf("%q: %v (retry after %v), want a retryable error asking for %v", prompt, err, ae, want)
		}
	}
}

// TestSayBeforeTool: say: streams its text and then the first tool call,
// in one step; the step after the call's result has no such text.
func TestSayBeforeTool(t *testing.T) {
	t.Parallel()
	m := &Model{}
	prompt := llm.Message{Role: llm.RoleUser, Content: []llm.Content{{Type: llm.ContentText, Text: "say:looking now\ntool:echo:{}\nreply:done"}}}
	var kinds []string
	var text strings.Builder
	collect := func(ev llm.Event) error {
		kinds = append(kinds, string(ev.Kind))
		text.WriteString(ev.Text)
		return nil
	}
	if err := m.Stream(context.Background(), llm.Request{Attempt: 1, Messages: []llm.Message{prompt}}, collect); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(kinds, ","); text.String() != "looking now" || !strings.HasSuffix(got, string(llm.EventToolCall)+","+string(llm.EventFinish)) {
		t.Fatalf("first step: %s %q", got, text.String())
	}
	kinds, text = nil, strings.Builder{}
	msgs := []llm.Message{prompt,
		{Role: llm.RoleAssistant, Content: []llm.Content{{Type: llm.ContentToolCall, CallID: "call_1", Name: "echo", Input: []byte("{}")}}},
		{Role: llm.RoleUser, Content: []llm.Content{{Type: llm.ContentToolResult, CallID: "call_1", Text: "x"}}}}
	if err := m.Stream(context.Background(), llm.Request{Attempt: 1, Messages: msgs}, collect); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(text.String(), "looking") || !strings.HasPrefix(text.String(), "done") {
		t.Errorf("second step: %q", text.String())
	}
}
