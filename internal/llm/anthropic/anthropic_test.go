package anthropic_test

import (
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/internal/fakellm"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/llm/anthropic"
)

// What the stream carries reaches the engine as events: signed thinking, text,
// parallel tool calls whose input arrives in pieces, usage with cache
// counts and the stop reason; an HTTP error keeps its status and
// Retry-After, and an event that is not JSON fails the call.
func TestStreamDecodesEveryKind(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(fakellm.New(fakellm.Options{}).Handler())
	defer srv.Close()
	p := anthropic.New(anthropic.Options{BaseURL: srv.URL + "/v1", APIKey: "k", HTTPClient: srv.Client()})
	stream := func(prompt string) ([]llm.Event, error) {
		var evs []llm.Event
		req := llm.Request{Model: "fake-model", Attempt: 1, Messages: []llm.Message{{Role: llm.RoleUser,
			Content: []llm.Content{{Type: llm.ContentText, Text: prompt}}}}}
		err := p.Stream(t.Context(), req, func(ev llm.Event) error { evs = append(evs, ev); return nil })
		return evs, err
	}

	evs, err := stream("reasoning:hmm\nusage:100,20,30,5\npar:read:{\"path\":\"a\"}\npar:list:{\"path\":\".\"}")
	if err != nil {
		t.Fatal(err)
	}
	var reasoning, signature string
	var calls []string
	for _, ev := range evs {
		switch ev.Kind {
		case llm.EventReasoning:
			reasoning += ev.Text
			signature += ev.Signature
		case llm.EventToolCall:
			calls = append(calls, ev.Name+" "+string(ev.Input))
			if ev.CallID == "" {
				t.Errorf("tool call %s without an id", ev.Name)
			}
		}
	}
	if reasoning != "hmm" || signature != "fakellm" {
		t.Errorf("reasoning = %q signed %q, want hmm signed fakellm", reasoning, signature)
	}
	if d := cmp.Diff([]string{`read {"path":"a"}`, `list {"path":"."}`}, calls); d != "" {
		t.Errorf("tool calls (-want +got):\n%s", d)
	}
	fin := evs[len(evs)-1]
	if fin.Kind != llm.EventFinish || fin.Finish != "tool-calls" {
		t.Errorf("last event %+v, want the finish with tool-calls", fin)
	}
	if u := (llm.Usage{Input: 100, Output: 20, CacheRead: 30, CacheWrite: 5}); fin.Usage != u {
		t.Errorf("usage = %+v, want %+v", fin.Usage, u)
	}

	evs, err = stream("reply:all good")
	if err != nil {
		t.Fatal(err)
	}
	text := ""
	for _, ev := range evs {
		if ev.Kind == llm.EventText {
			text += ev.Text
		}
	}
	if text != "all good" || evs[len(evs)-1].Finish != "stop" {
		t.Errorf("text %q, finish %q; want \"all good\", stop", text, evs[len(evs)-1].Finish)
	}

	_, err = stream("fail:429\nretryafter:7")
	var apiErr *llm.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || !apiErr.Retryable || apiErr.RetryAfter != 7*time.Second {
		t.Errorf("429: err = %#v, want a retryable APIError with Retry-After 7s", err)
	}
	if _, err = stream("malformed:"); err == nil {
		t.Error("an event that is not JSON passed")
	}
}
