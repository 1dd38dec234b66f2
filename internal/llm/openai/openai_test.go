package openai_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

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
	if again := dialled.Load() - first; again > calls/4 {
		t.Errorf("the second wave of %d calls dialled %d new connections (first wave %d)", calls, again, first)
	}
}
