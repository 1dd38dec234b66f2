package openai_test

import (
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/internal/fakellm"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/llm/openai"
)

// Many calls at once, then as many again, dial once each: the providers'
// shared client keeps its connections for the next steps.
func TestConnectionsReusedUnderConcurrency(t *testing.T) {
	var dialled atomic.Int64
	srv := httptest.NewUnstartedServer(fakellm.New(fakellm.Options{}).Handler())
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dialled.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	defer llm.HTTPClient.CloseIdleConnections()
	p := openai.New(openai.Options{BaseURL: srv.URL + "/v1"})
	const calls = 40
	wave := func() {
		var wg sync.WaitGroup
		for range calls {
			wg.Go(func() {
				req := llm.Request{Model: "fake-model", Attempt: 1, Messages: []llm.Message{{Role: llm.RoleUser,
					Content: []llm.Content{{Type: llm.ContentText, Text: "reply:ok"}}}}}
				if err := p.Stream(t.Context(), req, func(llm.Event) error { return nil }); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	wave()
	first := dialled.Load()
	wave()
	// A first wave that overlapped less (a loaded machine) left fewer
	// connections to reuse: those the second wave lacks it may dial.
	if again := dialled.Load() - first; again > max(calls-first, 0)+calls/4 {
		t.Errorf("the second wave of %d calls dialled %d new connections (first wave %d)", calls, again, first)
	}
}

// What the stream carries reaches the engine as events: reasoning, text,
// parallel tool calls whose arguments arrive in pieces, usage with cache
// counts and the finish reason; an HTTP error keeps its status and
// Retry-After, and a chunk that is not JSON fails the call.
func TestStreamDecodesEveryKind(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(fakellm.New(fakellm.Options{}).Handler())
	defer srv.Close()
	p := openai.New(openai.Options{BaseURL: srv.URL + "/v1", HTTPClient: srv.Client()})
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
	var kinds []string
	var text, reasoning string
	var calls []string
	var fin llm.Event
	for _, ev := range evs {
		switch ev.Kind {
		case llm.EventText:
			text += ev.Text
		case llm.EventReasoning:
			reasoning += ev.Text
		case llm.EventToolCall:
			calls = append(calls, ev.Name+" "+string(ev.Input))
			if ev.CallID == "" {
				t.Errorf("tool call %s without an id", ev.Name)
			}
		case llm.EventFinish:
			fin = ev
		}
		if len(kinds) == 0 || kinds[len(kinds)-1] != ev.Kind {
			kinds = append(kinds, ev.Kind)
		}
	}
	if reasoning != "hmm" {
		t.Errorf("reasoning = %q, want hmm", reasoning)
	}
	want := []string{`read {"path":"a"}`, `list {"path":"."}`}
	if d := cmp.Diff(want, calls); d != "" {
		t.Errorf("tool calls (-want +got):\n%s", d)
	}
	if fin.Finish != "tool-calls" {
		t.Errorf("finish = %q, want tool-calls", fin.Finish)
	}
	if u := (llm.Usage{Input: 100, Output: 20, CacheRead: 30, CacheWrite: 5}); fin.Usage != u {
		t.Errorf("usage = %+v, want %+v", fin.Usage, u)
	}
	if kinds[len(kinds)-1] != llm.EventFinish {
		t.Errorf("event kinds %v do not end with the finish", kinds)
	}

	evs, err = stream("reply:all good")
	if err != nil {
		t.Fatal(err)
	}
	text = ""
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
		t.Error("a chunk that is not JSON passed")
	}
}

// Over TLS the providers' shared transport speaks HTTP/2, as hosted
// providers do: a thousand sessions' streams share a few connections
// instead of holding one each, with its two goroutines and buffers.
func TestProviderTransportSpeaksHTTP2OverTLS(t *testing.T) {
	t.Parallel()
	var protos sync.Map
	fake := fakellm.New(fakellm.Options{}).Handler()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		protos.Store(r.Proto, true)
		fake.ServeHTTP(w, r)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	tr := llm.HTTPClient.Transport.(*http.Transport).Clone()
	if tr.TLSClientConfig == nil {
		tr.TLSClientConfig = &tls.Config{}
	}
	tr.TLSClientConfig.RootCAs = srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	client := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()
	p := openai.New(openai.Options{BaseURL: srv.URL + "/v1", HTTPClient: client})
	req := llm.Request{Model: "fake-model", Attempt: 1, Messages: []llm.Message{{Role: llm.RoleUser,
		Content: []llm.Content{{Type: llm.ContentText, Text: "reply:ok"}}}}}
	if err := p.Stream(t.Context(), req, func(llm.Event) error { return nil }); err != nil {
		t.Fatal(err)
	}
	var seen []string
	protos.Range(func(k, _ any) bool { seen = append(seen, k.(string)); return true })
	if len(seen) != 1 || seen[0] != "HTTP/2.0" {
		t.Errorf("the provider was called over %v, want HTTP/2.0 only", seen)
	}
}
