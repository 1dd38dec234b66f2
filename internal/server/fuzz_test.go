package server

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/engine"
)

// FuzzPromptBody feeds arbitrary bodies through the prompt decoder and the
// engine's validation: they must be refused or accepted, never crash.
func FuzzPromptBody(f *testing.F) {
	for _, s := range []string{
		`{"parts":[{"type":"text","text":"hi"}]}`,
		`{"parts":[{"type":"file","mime":"text/plain","url":"file:///x"}],"busy":"queue"}`,
		`{"messageID":"msg_0123456789abABCDEFGHIJKLMN","parts":[]}`,
		`{"parts":"x"}`, `{"model":{"providerID":1}}`, `[]`, `null`, `{`, ``,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		r := httptest.NewRequest("POST", "/session/x/message", strings.NewReader(body))
		var in promptBody
		if e := decodeJSON(r, &in, false); e != nil {
			if e.status != 400 && e.status != 413 {
				t.Fatalf("decode status %d", e.status)
			}
			return
		}
		p := engine.PromptInput{MessageID: in.MessageID, Parts: in.Parts, Model: in.Model, Policy: in.Busy}
		_ = p.Validate()
	})
}

func FuzzParseTimeout(f *testing.F) {
	for _, s := range []string{"30s", "1.5", "-3", "NaN", "1e400", "10m", "abc", "+Inf"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		r := httptest.NewRequest("POST", "/session/x/wait", nil)
		q := r.URL.Query()
		q.Set("timeout", v)
		r.URL.RawQuery = q.Encode()
		d, e := parseTimeout(r, 0, 600e9)
		if e == nil && (d < 0 || d > 600e9) {
			t.Fatalf("timeout %q gave %v outside the clamp", v, d)
		}
	})
}
