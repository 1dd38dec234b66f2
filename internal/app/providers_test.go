package app_test

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/fakellm"
)

// providerNode starts agentd whose only real provider is fakellm, reached
// over HTTP through the official SDK of the given kind.
func providerNode(t *testing.T, npm string) (*node, *fakellm.Server) {
	t.Helper()
	fake := fakellm.New(fakellm.Options{Second: 50 * time.Millisecond})
	hs := httptest.NewServer(fake.Handler())
	t.Cleanup(hs.Close)
	base := hs.URL + "/v1"
	if npm == "@ai-sdk/anthropic" {
		base = hs.URL + "/v1"
	}
	block := `{
	  "model": "fake/fake-model",
	  "provider": {
	    "fake": {
	      "npm": "` + npm + `",
	      "name": "Fake",
	      "options": {"baseURL": "` + base + `", "apiKey": "test-key", "timeout": 60000},
	      "models": {
        "fake-model": {"name": "Fake Model", "limit": {"context": 100000, "output": 4096}},
        "thinking-model": {"name": "Fake Thinking", "limit": {"context": 100000, "output": 4096},
          "options": {"thinking": {"type": "enabled", "budgetTokens": 2048}}}
      }
	    }
	  }
	}`
	f, err := config.Parse([]byte(block))
	if err != nil {
		t.Fatal(err)
	}
	models, def, err := f.Build()
	if err != nil {
		t.Fatal(err)
	}
	n := startNode(t, func(c *app.Config) {
		c.Models = models
		c.Engine.DefaultModel = def
	})
	return n, fake
}

var providerKinds = []string{"@ai-sdk/openai-compatible", "@ai-sdk/anthropic"}

func TestProviders(t *testing.T) {
	t.Parallel()
	for _, npm := range providerKinds {
		t.Run(npm, func(t *testing.T) {
			t.Parallel()
			n, fake := providerNode(t, npm)
			ctx := t.Context()

			t.Run("text and usage", func(t *testing.T) {
				sid := n.session()
				m := n.send(sid, "usage:10,5,3,2\nreply:hello from the wire")
				if textOf(m) != "hello from the wire" {
					t.Fatalf("answer = %q", textOf(m))
				}
				if m.Info.ProviderID != "fake" || m.Info.ModelID != "fake-model" {
					t.Errorf("model = %s/%s", m.Info.ProviderID, m.Info.ModelID)
				}
				sf := partOf(m, core.PartStepFinish)
				want := core.Tokens{Input: 10, Output: 5, Cache: core.CacheTokens{Read: 3, Write: 2}}
				if sf == nil || sf.Tokens != want || m.Info.Tokens != want {
					t.Errorf("tokens = %+v / %+v, want %+v", sf, m.Info.Tokens, want)
				}
			})
			t.Run("tool loop", func(t *testing.T) {
				sid := n.session()
				m := n.send(sid, "tool:echo:{\"text\":\"first\"}\ntool:echo:{\"text\":\"second\"}\nreply:both done")
				if got := textOf(m); got != "both done\ntool echo returned: second" {
					t.Fatalf("answer = %q", got)
				}
				runs, _ := n.c.Runs(ctx, sid)
				if runs[0].Steps != 3 || runs[0].State != core.RunSucceeded {
					t.Errorf("run = %+v", runs[0])
				}
			})
			// With thinking on, Anthropic wants a tool-use turn's signed
			// thinking back with its results (fakellm refuses the next
			// step otherwise, as the API does); the signature is kept in
			// the reasoning part's metadata, where opencode keeps it.
			t.Run("thinking with tools", func(t *testing.T) {
				sid := n.session()
				m, err := n.c.Send(ctx, sid, client.Prompt{Text: "reasoning:let me look\ntool:echo:{\"text\":\"x\"}\nreply:looked",
					Model: &client.ModelRef{ProviderID: "fake", ModelID: "thinking-model"}})
				if err != nil {
					t.Fatal(err)
				}
				if got := textOf(m); !strings.HasPrefix(got, "looked") {
					t.Fatalf("answer = %q", got)
				}
				msgs, err := n.c.Messages(ctx, sid)
				if err != nil {
					t.Fatal(err)
				}
				var reasoning *core.Part
				for _, m := range msgs {
					if p := partOf(m, core.PartReasoning); p != nil && reasoning == nil {
						reasoning = p
					}
				}
				if reasoning == nil || reasoning.Text != "let me look" {
					t.Fatalf("reasoning part = %+v", reasoning)
				}
				an, _ := reasoning.Metadata["anthropic"].(map[string]any)
				if sig, _ := an["signature"].(string); (npm == "@ai-sdk/anthropic") != (sig == "fakellm") {
					t.Errorf("reasoning metadata = %v (provider %s)", reasoning.Metadata, npm)
				}
			})
			t.Run("429 with Retry-After", func(t *testing.T) {
				sid := n.session()
				before := time.Now()
				m := n.send(sid, "fail:429x1\nretryafter:1\nreply:after the wait")
				if textOf(m) != "after the wait" {
					t.Fatalf("answer = %q", textOf(m))
				}
				if time.Since(before) < 900*time.Millisecond {
					t.Error("Retry-After: 1 was not honoured")
				}
				var retry *core.OpencodeStatus
				var at int64
				for _, ev := range n.allEvents() {
					if ev.Type == core.EventSessionStatus && ev.SessionID == sid {
						var p core.StatusEventProps
						json.Unmarshal(ev.Properties, &p)
						if p.Status.Type == core.StatusRetry {
							retry, at = &p.Status, ev.Time
						}
					}
				}
				if retry == nil || *retry.Attempt != 1 || !strings.Contains(*retry.Message, "429") && *retry.Message == "" {
					t.Fatalf("retry status = %+v", retry)
				}
				// next is taken as the wait starts, 1 s ahead: after the
				// prompt was sent, and before the status's commit stamped
				// its event (how long after depends on the machine's load).
				if lo, hi := before.UnixMilli()+1000, at+1000; *retry.Next < lo || *retry.Next > hi {
					t.Errorf("next is %d ms after the retry status and %d ms after the prompt, want at most 1000 and at least 1000",
						*retry.Next-at, *retry.Next-before.UnixMilli())
				}
			})
			t.Run("retries exhausted", func(t *testing.T) {
				m := n.send(n.session(), "fail:503")
				idle := partOf(m, core.PartIdle)
				if idle.Outcome != core.RunFailed || core.EndReason(idle.Reason) != core.ReasonRetriesExhausted || idle.Error.Name != "APIError" {
					t.Fatalf("idle = %+v", idle)
				}
				if idle.Error.Data.Extra["statusCode"] != float64(503) || idle.Error.Data.Extra["responseHeaders"] == nil || idle.Error.Data.Extra["responseBody"] == nil {
					t.Errorf("APIError data = %+v", idle.Error.Data.Extra)
				}
			})
			t.Run("auth error", func(t *testing.T) {
				m := n.send(n.session(), "fail:401")
				idle := partOf(m, core.PartIdle)
				if core.EndReason(idle.Reason) != core.ReasonProviderError || idle.Error.Name != "ProviderAuthError" {
					t.Fatalf("idle = %+v", idle)
				}
			})
			t.Run("disconnect mid-stream", func(t *testing.T) {
				sid := n.session()
				m := n.send(sid, "disconnect:3\nreply:one two three four five six")
				if textOf(m) != "one two three four five six" {
					t.Fatalf("answer = %q", textOf(m))
				}
				var broken []client.MessageWithParts
				for _, mm := range mustMessages(t, n, sid) {
					if mm.Info.Error.Ref() == core.RefStreamRetried {
						broken = append(broken, mm)
					}
				}
				if len(broken) != 1 || textOf(broken[0]) == "" {
					t.Fatalf("the broken attempt must stay visible, marked: %d", len(broken))
				}
			})
			t.Run("malformed stream", func(t *testing.T) {
				m := n.send(n.session(), "malformed:\nreply:x")
				if idle := partOf(m, core.PartIdle); idle.Outcome != core.RunFailed || core.EndReason(idle.Reason) != core.ReasonRetriesExhausted {
					t.Fatalf("idle = %+v", idle)
				}
			})
			t.Run("abort closes the upstream connection", func(t *testing.T) {
				sid := n.session()
				drain(fake.ClientGone())
				// The answer would stream for 180 s (3,600 fake seconds of
				// 50 ms): its connection closes sooner only when the abort
				// closes it.
				if err := n.c.SendAsync(ctx, sid, client.Prompt{Text: "sleep:3600"}); err != nil {
					t.Fatal(err)
				}
				n.streamingStarted(sid, "")
				start := time.Now()
				if ok, err := n.c.Abort(ctx, sid); err != nil || !ok {
					t.Fatalf("abort: %v %v", ok, err)
				}
				select {
				case <-fake.ClientGone():
					t.Logf("upstream closed %v after abort", time.Since(start))
				case <-time.After(60 * time.Second):
					t.Fatal("the provider connection was not closed")
				}
			})
		})
	}
}

func drain(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}
