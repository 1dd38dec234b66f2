package tool

import (
	"slices"
	"strings"
	"testing"
)

// TestEnvIsAnAllowList: tools get the server's variables that Base names
// (PATH, HOME, LANG, LC_*, …) and those the operator passes, nothing
// else: tokens the server happens to hold (GitHub, AWS, Gemini,
// OpenRouter, anything) stay out though no list of secrets names them
// (they reached tools when the environment was the server's less a list
// of known secrets).
func TestEnvIsAnAllowList(t *testing.T) {
	for k, v := range map[string]string{
		"GITHUB_TOKEN": "ghp-secret", "AWS_ACCESS_KEY_ID": "AKIA-secret", "AWS_SECRET_ACCESS_KEY": "aws-secret",
		"GEMINI_API_KEY": "gemini-secret", "OPENROUTER_API_KEY": "or-secret", "SOME_PRIVATE_THING": "private",
		"HTTPS_PROXY": "http://user:pw@proxy:3128", "OPENAI_API_KEY": "sk-secret", "MY_GATEWAY_TOKEN": "config-ref",
		"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TERM": "xterm", "TZ": "UTC", "HOME": "/home/u", "PATH": "/usr/bin:/bin",
		"MY_BUILD_FLAGS": "-v",
	} {
		t.Setenv(k, v)
	}
	names := func(e *Env) []string {
		var out []string
		for _, kv := range e.Environ() {
			name, _, _ := strings.Cut(kv, "=")
			out = append(out, name)
		}
		return out
	}
	for _, e := range []*Env{nil, NewEnv([]string{"MY_GATEWAY_TOKEN"}, nil)} {
		got := names(e)
		for _, n := range []string{"GITHUB_TOKEN", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "GEMINI_API_KEY",
			"OPENROUTER_API_KEY", "SOME_PRIVATE_THING", "HTTPS_PROXY", "OPENAI_API_KEY", "MY_GATEWAY_TOKEN", "MY_BUILD_FLAGS"} {
			if slices.Contains(got, n) {
				t.Errorf("a tool sees %s", n)
			}
		}
		for _, n := range []string{"PATH", "HOME", "LANG", "LC_ALL", "TERM", "TZ"} {
			if !slices.Contains(got, n) {
				t.Errorf("a tool does not see %s", n)
			}
		}
	}
	// agentd.toolEnv passes by name or pattern, secrets and references
	// included when it names them.
	got := names(NewEnv([]string{"MY_GATEWAY_TOKEN"}, []string{"GITHUB_TOKEN", "MY_*"}))
	for n, want := range map[string]bool{"GITHUB_TOKEN": true, "MY_BUILD_FLAGS": true, "MY_GATEWAY_TOKEN": true,
		"OPENAI_API_KEY": false, "AWS_SECRET_ACCESS_KEY": false, "PATH": true} {
		if slices.Contains(got, n) != want {
			t.Errorf("with toolEnv [GITHUB_TOKEN MY_*]: sees %s = %v, want %v", n, !want, want)
		}
	}
}
