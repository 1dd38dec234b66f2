package builtin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/permission"
	"github.com/agentd/agentd/internal/tool"
)

// decide is what the engine decides for a call's needs with the default
// rules and the session's grants.
func decide(needs []tool.Need, granted []core.Rule) string {
	out := core.ActionAllow
	for _, n := range needs {
		switch n.Decide(permission.Defaults(), nil, granted) {
		case core.ActionDeny:
			return core.ActionDeny
		case core.ActionAsk:
			out = core.ActionAsk
		}
	}
	return out
}

// grant is what an "always" answer to every need of the call stores.
func grant(needs []tool.Need) []core.Rule {
	var rules []core.Rule
	for _, n := range needs {
		for _, a := range n.Always {
			rules = append(rules, core.Rule{Permission: n.Permission, Pattern: a, Action: core.ActionAllow})
		}
	}
	return rules
}

func bashNeeds(t *testing.T, ws, command string) []tool.Need {
	t.Helper()
	in, _ := json.Marshal(map[string]string{"command": command})
	return Bash{}.Needs(tool.Call{Directory: ws, Input: in})
}

// TestBashAlwaysAllowsOnlyWhatWasAsked replays the escapes found against
// the first-word grant: after "always" on one command, each of these must
// still ask.
func TestBashAlwaysAllowsOnlyWhatWasAsked(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	for _, tc := range []struct {
		granted string
		later   string
		want    string
	}{
		{"echo hi; id -u", "echo ok; head -c 20 /etc/shadow", core.ActionAsk},
		{"echo hi; id -u", "echo PWN > ../outside", core.ActionAsk},
		{"echo hi; id -u", "echo $(cat /etc/hostname) `id`", core.ActionAsk},
		{"echo hi; id -u", "echo $(cat hostname)", core.ActionAsk},
		{"echo hi; id -u", "echo x | sh", core.ActionAsk},
		{"echo hi; id -u", "echo x > $HOME/.bashrc", core.ActionAsk},
		{"echo hi; id -u", "echo <(curl x)", core.ActionAsk},
		{"echo hi; id -u", "PATH=/tmp echo x", core.ActionAsk},
		{"git status", "git push --force", core.ActionAsk},
		{"git status", "git status && rm -rf .", core.ActionAsk},
		{"bash -c 'ls'", "bash -c 'rm -rf .'", core.ActionAsk},
		{"xargs ls", "xargs rm", core.ActionAsk},
		{"find . -name x", "find . -exec rm {} +", core.ActionAsk},
		{"echo hi", "echo (", core.ActionAsk},
		{"echo hi", "echo hi > /etc/motd", core.ActionAsk},
		{"echo hi", "cat ~/.ssh/id_rsa", core.ActionAsk},
		{"ls", "ls /", core.ActionAsk},
		{"ls", "ls ../..", core.ActionAsk},
		// What was granted, and what it was meant to cover, runs.
		{"echo hi; id -u", "echo bye; id", core.ActionAllow},
		{"echo hi; id -u", "echo hi > out.txt 2>/dev/null", core.ActionAllow},
		{"git status", "git status --short | head -5", core.ActionAsk}, // head was never granted
		{"git status; head -1 x", "git status --short | head -5", core.ActionAllow},
		{"npm run build", "npm run build -- --watch", core.ActionAllow},
		{"npm run build", "npm run deploy", core.ActionAsk},
		{"go test ./...", "go test -run X ./internal/...", core.ActionAllow},
		{"ls -la", "ls sub/dir", core.ActionAllow},
	} {
		granted := grant(bashNeeds(t, ws, tc.granted))
		if got := decide(bashNeeds(t, ws, tc.later), granted); got != tc.want {
			t.Errorf("after always on %q, %q: %s, want %s (grants %v)", tc.granted, tc.later, got, tc.want, granted)
		}
	}
}

func TestBashNeeds(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	if err := os.Mkdir(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	needs := bashNeeds(t, ws, "cd sub && echo x > out.txt; cat < ../../etc/passwd 2>&1 >> log")
	type need struct {
		Permission string
		Patterns   []string
	}
	var got []need
	for _, n := range needs {
		got = append(got, need{n.Permission, n.Patterns})
	}
	// The echo runs in sub (only if the cd succeeded); after the && list,
	// files are judged from both directories the script may be in:
	// ../../etc from the workspace and from sub.
	want := []need{
		{"external_directory", []string{filepath.Dir(filepath.Dir(ws)) + "/etc", filepath.Dir(ws) + "/etc"}},
		{"edit", []string{"sub/out.txt", "log", "sub/log"}},
		{"bash", []string{"cd sub", "echo x", "cat"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("needs (-want +got):\n%s", diff)
	}
	if got := needs[2].Metadata["command"]; got == nil {
		t.Error("no command in the ask's metadata")
	}
	// A command that does not parse asks even when every command is
	// allowed, and offers no grant.
	bad := bashNeeds(t, ws, "echo $((")
	if len(bad) != 1 || !bad[0].Ask || len(bad[0].Always) != 0 {
		t.Errorf("unparsed needs = %+v", bad)
	}
}

// TestToolsDoNotSeeSecrets: an approved `env` prints neither the
// providers' keys, the server's password nor what the configuration read
// with {env:…}, unless the operator passes it.
func TestToolsDoNotSeeSecrets(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-secret-openai")
	t.Setenv("ANTHROPIC_API_KEY", "sk-secret-anthropic")
	t.Setenv("AGENTD_SERVER_PASSWORD", "secret-password")
	t.Setenv("MY_GATEWAY_TOKEN", "secret-config-ref")
	t.Setenv("PLAIN_SETTING", "visible")
	ws := t.TempDir()
	env := func(e *tool.Env) string {
		in, _ := json.Marshal(map[string]string{"command": "env"})
		res, err := Bash{}.Run(t.Context(), tool.Call{Directory: ws, Input: in, Env: e})
		if err != nil || res.IsError {
			t.Fatalf("env: %v %+v", err, res)
		}
		return res.Output
	}
	for _, e := range []*tool.Env{nil, tool.NewEnv([]string{"MY_GATEWAY_TOKEN"}, nil)} {
		out := env(e)
		for _, secret := range []string{"sk-secret-openai", "sk-secret-anthropic", "secret-password"} {
			if strings.Contains(out, secret) {
				t.Errorf("a tool saw %q", secret)
			}
		}
		if strings.Contains(out, "PLAIN_SETTING=visible") || !strings.Contains(out, "PATH=") {
			t.Error("the environment is not the allow-list's (tool.Base)")
		}
		if e != nil && strings.Contains(out, "secret-config-ref") {
			t.Error("a tool saw a variable the configuration read")
		}
	}
	out := env(tool.NewEnv([]string{"MY_GATEWAY_TOKEN"}, []string{"MY_*", "OPENAI_API_KEY"}))
	if !strings.Contains(out, "secret-config-ref") || !strings.Contains(out, "sk-secret-openai") || strings.Contains(out, "sk-secret-anthropic") {
		t.Errorf("toolEnv did not pass exactly what it names:\n%s", out)
	}
}
