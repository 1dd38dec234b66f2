package fakellm_test

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/agentd/agentd/internal/fakellm"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/llm/anthropic"
	"github.com/agentd/agentd/internal/llm/openai"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A tiny PNG and PDF, base64.
const (
	pngData = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAAAAAA6fptVAAAACklEQVR4nGNgAAAAAgABSK+kcQAAAABJRU5ErkJggg=="
	pdfData = "JVBERi0xLjQKJSVFT0YK"
)

// Pictures and documents sent through each provider reach the fake as
// image and document content (what tests assert on), the scripted model
// answers attachments: with them, and data that is not what it says is
// refused with a 400, as the real APIs refuse it.
func TestMediaOverTheWire(t *testing.T) {
	t.Parallel()
	fake := fakellm.New(fakellm.Options{Record: true})
	srv := httptest.NewServer(fake.Handler())
	t.Cleanup(srv.Close)
	t.Cleanup(srv.Client().CloseIdleConnections)
	providers := map[string]llm.Provider{
		"openai":    openai.New(openai.Options{BaseURL: srv.URL + "/v1", HTTPClient: srv.Client()}),
		"anthropic": anthropic.New(anthropic.Options{BaseURL: srv.URL + "/v1", APIKey: "k", HTTPClient: srv.Client()}),
	}
	for name, p := range providers {
		t.Run(name, func(t *testing.T) {
			media := []llm.Content{
				{Type: llm.ContentImage, MediaType: "image/png", Data: pngData},
				{Type: llm.ContentDocument, MediaType: "application/pdf", Data: pdfData, Filename: "spec.pdf"},
			}
			prompt := append([]llm.Content{{Type: llm.ContentText, Text: "attachments:"}}, media...)
			text := ""
			req := llm.Request{Model: "fake-model", Attempt: 1, Messages: []llm.Message{{Role: llm.RoleUser, Content: prompt}}}
			err := p.Stream(t.Context(), req, func(ev llm.Event) error { text += ev.Text; return nil })
			if err != nil {
				t.Fatal(err)
			}
			if text != "image image/png 67 bytes\ndocument application/pdf 15 bytes spec.pdf" {
				t.Errorf("answer = %q", text)
			}
			var got []llm.Content
			for _, c := range fake.Recorded()[len(fake.Recorded())-1].Request.Messages[0].Content {
				if c.Type != llm.ContentText {
					got = append(got, c)
				}
			}
			if d := cmp.Diff(media, got); d != "" {
				t.Errorf("received (-sent +got):\n%s", d)
			}

			bad := llm.Request{Model: "fake-model", Attempt: 1, Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Content{
				{Type: llm.ContentText, Text: "reply:x"}, {Type: llm.ContentImage, MediaType: "image/png", Data: "not base64!"}}}}}
			err = p.Stream(t.Context(), bad, func(llm.Event) error { return nil })
			var apiErr *llm.APIError
			if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, "base64") {
				t.Errorf("bad picture: err = %v, want a 400 about base64", err)
			}
		})
	}
}
