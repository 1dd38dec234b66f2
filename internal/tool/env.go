package tool

import (
	"os"
	"strings"

	"github.com/agentd/agentd/internal/permission"
)

// Base are the variables of the server's environment every tool process
// gets (names, or patterns with '*'): where programs, the user's files,
// configuration, caches and toolchains are, who the user is, language,
// terminal, time zone and temp folder. None of them carries a
// credential; a variable not listed here reaches tools only when the
// operator names it in agentd.toolEnv. Proxy settings are left out on
// purpose: their URLs may hold a password.
var Base = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_*", "TERM", "COLORTERM",
	"TZ", "TMPDIR", "NO_COLOR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME",
	"GOPATH", "GOROOT", "GOCACHE", "GOMODCACHE", "CARGO_HOME", "RUSTUP_HOME", "JAVA_HOME",
}

// Secrets are variables no tool process sees unless the operator names
// them in agentd.toolEnv, even where a pattern of Base would match: the
// stock providers' keys (the configuration adds every provider kind's,
// see config.KeyVars), the server's password and database URL, and the
// tracing exporter's headers (which carry credentials).
var Secrets = []string{
	"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AGENTD_SERVER_PASSWORD", "OPENCODE_SERVER_PASSWORD",
	"AGENTD_DATABASE_URL", "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
}

// Env is the environment tool processes run with, built from an
// allow-list: the server's variables named by Base or by what the
// operator passes (agentd.toolEnv), less Secrets and the configuration's
// {env:…} references unless the operator passes them by name or
// pattern. A token the server happens to have (GITHUB_TOKEN, AWS keys,
// any provider's) is not passed because nobody listed it. The zero Env
// passes Base less Secrets.
type Env struct {
	secret map[string]bool
	pass   []string
	// add are variables set for the processes whatever the server has
	// (see With).
	add map[string]string
}

// NewEnv passes Base and pass (names, or patterns with '*'), and keeps
// Secrets and the extra names (the variables the configuration read with
// {env:…}) from tools unless pass names them.
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
	if matchAny(e.pass, name) {
		return false
	}
	return e.secret[name] || !matchAny(Base, name)
}

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if permission.Match(p, name) {
			return true
		}
	}
	return false
}

// Environ is the server's environment as tools see it.
func (e *Env) Environ() []string {
	all := os.Environ()
	out := all[:0:0]
	for _, kv := range all {
		name, _, _ := strings.Cut(kv, "=")
		if _, set := e.addOrNil()[name]; !set && !e.Hidden(name) {
			out = append(out, kv)
		}
	}
	for k, v := range e.addOrNil() {
		out = append(out, k+"="+v)
	}
	return out
}

// With returns an Env that passes what e passes and adds vars (a
// plugin's shell.env): names it sets win over the server's.
func (e *Env) With(vars map[string]string) *Env {
	out := &Env{}
	if e != nil {
		*out = *e
	} else {
		out = NewEnv(nil, nil)
	}
	out.add = make(map[string]string, len(e.addOrNil())+len(vars))
	for k, v := range e.addOrNil() {
		out.add[k] = v
	}
	for k, v := range vars {
		out.add[k] = v
	}
	return out
}

func (e *Env) addOrNil() map[string]string {
	if e == nil {
		return nil
	}
	return e.add
}
