package llm

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/core"
)

// TestFromTransportUnreachable: a host that does not exist fails at once,
// a refused connection gets a few quick tries, and each says in one line
// where and what to check; other transport failures keep the engine's
// retry policy.
func TestFromTransportUnreachable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, refused := http.Post("http://"+addr+"/v1/chat/completions", "application/json", strings.NewReader("{}"))
	var ae *APIError
	if !errors.As(FromTransport(refused), &ae) || !ae.Retryable || ae.MaxAttempts != RefusedAttempts ||
		ae.RetryAfter == 0 || !strings.Contains(ae.Message, "cannot reach http://"+addr+": connection refused") ||
		strings.Contains(ae.Message, "\n") || strings.Contains(ae.Message, "Post ") {
		t.Errorf("refused: %+v", ae)
	}
	noHost := &url.Error{Op: "Post", URL: "http://lcoalhost:11434/v1/chat/completions",
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "lcoalhost", IsNotFound: true}}}
	if !errors.As(FromTransport(noHost), &ae) || ae.Retryable || !strings.Contains(ae.Message, `cannot reach http://lcoalhost:11434: no such host "lcoalhost"`) ||
		!strings.Contains(ae.Message, "baseURL") {
		t.Errorf("no such host: %+v", ae)
	}
	broken := &url.Error{Op: "Post", URL: "http://127.0.0.1:1/v1", Err: io.ErrUnexpectedEOF}
	if !errors.As(FromTransport(broken), &ae) || !ae.Retryable || ae.MaxAttempts != 0 {
		t.Errorf("a broken stream: %+v", ae)
	}
}

// TestResolveSaysWhatWasMeant: a mistyped provider or model gets the
// nearest name and the known ones; a stock provider without its key says
// which key to set.
func TestResolveSaysWhatWasMeant(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	r.Add("local", nil, map[string]Model{"qwen2.5-coder": {}, "llama3": {}})
	r.Add("agentd", nil, nil)
	r.Unconfigured("anthropic", "set ANTHROPIC_API_KEY")
	for _, c := range []struct {
		ref  core.ModelRef
		want string
	}{
		{core.ModelRef{ProviderID: "lcoal", ModelID: "x"}, `unknown provider "lcoal" (did you mean "local"? known: agentd, anthropic, local)`},
		{core.ModelRef{ProviderID: "nope", ModelID: "x"}, `unknown provider "nope" (known: agentd, anthropic, local)`},
		{core.ModelRef{ProviderID: "local", ModelID: "qwen2.5-coderr"}, `provider "local" has no model "qwen2.5-coderr" (did you mean "qwen2.5-coder"? known: llama3, qwen2.5-coder)`},
		{core.ModelRef{ProviderID: "anthropic", ModelID: "claude-sonnet-4-5"}, `provider "anthropic" is not configured: set ANTHROPIC_API_KEY`},
	} {
		if _, _, err := r.Resolve(c.ref); err == nil || err.Error() != c.want {
			t.Errorf("Resolve(%v) = %v, want %s", c.ref, err, c.want)
		}
	}
	r.Add("anthropic", nil, nil)
	if _, _, err := r.Resolve(core.ModelRef{ProviderID: "anthropic", ModelID: "m"}); err != nil {
		t.Errorf("once added: %v", err)
	}
}
