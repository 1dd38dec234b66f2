package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func lookupNone(string) (string, bool) { return "", false }

// TestStrictProblems pins what a user is told about a file that cannot be
// meant: each problem with its line and column, and the nearest known key.
func TestStrictProblems(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, doc string
		want      []string
	}{
		{"typo at the top", "{\n  \"modle\": \"openai/gpt-4.1\"\n}",
			[]string{`f.json:2:3: modle: unknown key "modle" (did you mean "model"?)`}},
		{"typo in agentd", `{"agentd": {"maxStep": 5}}`,
			[]string{`f.json:1:13: agentd.maxStep: unknown key "maxStep" (did you mean "maxSteps"?)`}},
		{"every problem at once", "{\"agent\": {\"build\": {\"tempreature\": 1}},\n \"provider\": {\"p\": {\"options\": {\"baseUrl\": \"x\"}}}}",
			[]string{`f.json:1:22: agent.build.tempreature: unknown key "tempreature" (did you mean "temperature"?)`,
				`f.json:2:33: provider.p.options.baseUrl: unknown key "baseUrl" (did you mean "baseURL"?)`}},
		{"nothing near", `{"agentd": {"zzzzzz": 1}}`,
			[]string{`f.json:1:13: agentd.zzzzzz: unknown key "zzzzzz" (known here: events, maxSteps, mcp, plugins, projectCommandAgents, questions, resume, retry, sandbox, snapshot, terminal, toolEnv, webfetch, webhooks)`}},
		{"case matters", `{"Model": "a/b"}`,
			[]string{`f.json:1:2: Model: unknown key "Model" (did you mean "model"?)`}},
		{"syntax", "{\n  \"model\": \"a/b\"\n  \"small_model\": \"a/c\"\n}",
			[]string{`f.json:3:3: JSON: invalid character '"' after object key:value pair`}},
		{"unclosed", "{\"model\": \"a/b\",\n \"agent\": {",
			[]string{`f.json:2:12: JSON: the document ends too early (an object or array is not closed)`}},
		{"wrong type", "{\"agentd\": {\n  \"maxSteps\": \"five\"}}",
			[]string{`f.json:2:15: agentd.maxSteps: want a number, got string`}},
		{"unset variable", "{\"provider\": {\"p\": {\"options\": {\n \"apiKey\": \"{env:AGENTD_SURELY_UNSET}\"}}}}",
			[]string{`f.json:2:13: {env:AGENTD_SURELY_UNSET}: the variable AGENTD_SURELY_UNSET is not set (set it, or remove the reference)`}},
	} {
		_, _, err := ParseFile("f.json", []byte(c.doc), lookupNone)
		var ce *Error
		if !errors.As(err, &ce) {
			t.Errorf("%s: err = %v, want problems", c.name, err)
			continue
		}
		var got []string
		for _, p := range ce.Problems {
			got = append(got, p.String())
		}
		if d := cmp.Diff(c.want, got); d != "" {
			t.Errorf("%s: problems (-want +got):\n%s", c.name, d)
		}
	}
}

// TestOpencodeFileAccepted: an opencode.jsonc pasted in — comments,
// trailing commas, $schema and keys agentd does not use — loads, and the
// ignored keys are named.
func TestOpencodeFileAccepted(t *testing.T) {
	t.Parallel()
	doc := `{
  "$schema": "https://opencode.ai/config.json", // the editor's schema
  /* a block
     comment */
  "theme": "opencode",
  "model": "local/qwen",
  "tools": {"webfetch": false},
  "provider": {
    "local": {
      "npm": "@ai-sdk/openai-compatible",
      "options": {"baseURL": "http://127.0.0.1:11434/v1", "setCacheKey": true,},
      "models": {"qwen": {"name": "Qwen", "tool_call": true, "limit": {"context": 32000, "output": 4096}}},
    },
  },
  "agent": {"build": {"color": "#ff0000", "steps": 5}},
}`
	f, warnings, err := ParseFile("opencode.jsonc", []byte(doc), lookupNone)
	if err != nil {
		t.Fatal(err)
	}
	if f.Model != "local/qwen" || f.Provider["local"].Models["qwen"].Limit.Context != 32000 || f.Agent["build"].Steps != 5 {
		t.Errorf("parsed %+v", f)
	}
	var got []string
	for _, w := range warnings {
		got = append(got, w.Key)
	}
	want := []string{"theme", "provider.local.options.setCacheKey", "provider.local.models.qwen.tool_call", "agent.build.color"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ignored keys (-want +got):\n%s", d)
	}
	agents, err := f.Agents(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range agents {
		if a.ToolEnabled("webfetch") {
			t.Errorf("agent %s may use webfetch although the top-level tools turned it off", a.Name)
		}
	}
}

// TestEnvSubstitutionKeepsPositions: a problem after a substituted value
// is still reported where it is in the file.
func TestEnvSubstitutionKeepsPositions(t *testing.T) {
	t.Parallel()
	lookup := func(string) (string, bool) { return "a much longer value than the reference", true }
	_, _, err := ParseFile("f.json", []byte(`{"provider": {"p": {"options": {"apiKey": "{env:K}", "bseURL": "x"}}}}`), lookup)
	if err == nil || !strings.Contains(err.Error(), `f.json:1:54: provider.p.options.bseURL`) {
		t.Errorf("err = %v", err)
	}
}

// TestLoadReadsAFileOnce: --config naming the workspace's own file (by
// another path) reads it once.
func TestLoadReadsAFileOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "agentd.json")
	if err := os.WriteFile(p, []byte(`{"model":"agentd/scripted"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	loaded, err := Load([]string{p, filepath.Join(dir, ".", "agentd.json")}, filepath.Join(dir, ".", "agentd.json"))
	if err != nil || len(loaded.Used) != 1 {
		t.Errorf("used %v, err %v", loaded.Used, err)
	}
}

func TestNearest(t *testing.T) {
	t.Parallel()
	keys := []string{"model", "small_model", "provider", "maxSteps", "permission"}
	for in, want := range map[string]string{"modle": "model", "maxstep": "maxSteps", "permision": "permission",
		"providers": "provider", "x": "", "colour": ""} {
		if got := Nearest(in, keys); got != want {
			t.Errorf("Nearest(%q) = %q, want %q", in, got, want)
		}
	}
}
