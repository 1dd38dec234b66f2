package tool

import (
	"os"
	"strings"

	"github.com/agentd/agentd/internal/permission"
)

// Secrets are the variables no tool process sees unless the operator
// passes them: the stock providers' keys (the configuration adds every
// provider kind's, see config.KeyVars), the server's password and
// database URL, and the tracing exporter's headers (which carry
// credentials).
var Secrets = []string{
	"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AGENTD_SERVER_PASSWORD", "OPENCODE_SERVER_PASSWORD",
	"AGENTD_DATABASE_URL", "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
}

// Env is the environment tool processes run with: the server's own, less
// the secrets, except what the operator passes. The zero Env scrubs
// Secrets.
type Env struct {
	secret map[string]bool
	pass   []string
}

// NewEnv scrubs Secrets and the extra names (the variables the
// configuration read with {env:…}), except those matching one of pass
// (names, or patterns with '*').
func NewEnv(extra, pass []string) *Env {
	e := &Env{secret: make(map[string]bool), pass: pass}
	for _, n := range append(append([]string{}, Secrets...), extra...) {
		e.secret[n] = true
	}
	return e
}

// Hidden reports whether the variable name is kept from tools.
func (e *Env) Hidden(name string) bool {
	if e == nil {
		return NewEnv(nil, nil).Hidden(name)
	}
	if !e.secret[name] {
		return false
	}
	for _, p := range e.pass {
		if permission.Match(p, name) {
			return false
		}
	}
	return true
}

// Environ is the server's environment as tools see it.
func (e *Env) Environ() []string {
	all := os.Environ()
	out := all[:0:0]
	for _, kv := range all {
		name, _, _ := strings.Cut(kv, "=")
		if !e.Hidden(name) {
			out = append(out, kv)
		}
	}
	return out
}
