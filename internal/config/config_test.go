package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/permission"
)

func TestLoadMergesAndBuilds(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("AGENTD_TEST_KEY", "sk-\"quoted\"")
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("ANTHROPIC_API_KEY", "")
	global := filepath.Join(dir, "global.json")
	project := filepath.Join(dir, "project.json")
	os.WriteFile(global, []byte(`{"model":"agentd/scripted","provider":{"local":{"npm":"@ai-sdk/openai-compatible","options":{"baseURL":"http://127.0.0.1:1/v1","apiKey":"{env:AGENTD_TEST_KEY}"}}}}`), 0o644)
	os.WriteFile(project, []byte(`{"model":"local/qwen","provider":{"claude":{"npm":"@ai-sdk/anthropic","options":{"timeout":false}}},"permission":{"bash":"ask"},"agentd":{"maxSteps":7}}`), 0o644)
	loaded, err := Load([]string{global, project, filepath.Join(dir, "missing.json")}, "")
	if err != nil || len(loaded.Used) != 2 {
		t.Fatalf("load: %v %v", loaded.Used, err)
	}
	f := loaded.File
	if f.Model != "local/qwen" || f.Agentd.MaxSteps != 7 || len(f.Provider) != 2 {
		t.Errorf("merged = %+v", f)
	}
	if f.Provider["local"].Options.APIKey != `sk-"quoted"` {
		t.Errorf("env substitution = %q", f.Provider["local"].Options.APIKey)
	}
	if len(f.EnvRefs) != 1 || f.EnvRefs[0] != "AGENTD_TEST_KEY" {
		t.Errorf("variables read = %v, want the one {env:} names (kept from tools)", f.EnvRefs)
	}
	reg, def, err := f.Build()
	if err != nil {
		t.Fatal(err)
	}
	if def.ProviderID != "local" || def.ModelID != "qwen" {
		t.Errorf("default = %+v", def)
	}
	if got := reg.Providers(); len(got) != 3 {
		t.Errorf("providers = %v", got)
	}
	if _, err := Load([]string{filepath.Join(dir, "nope.json")}, filepath.Join(dir, "nope.json")); err == nil {
		t.Error("missing explicit config accepted")
	}
	bad := File{Provider: map[string]Provider{"x": {NPM: "@ai-sdk/google"}}}
	if _, _, err := bad.Build(); err == nil {
		t.Error("unsupported npm accepted")
	}
}

// FuzzParse: configuration text from users must parse or be refused, and
// whatever parses must build or be refused — never crash.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"model":"a/b"}`, `{"model":"nope"}`,
		`{"provider":{"p":{"npm":"@ai-sdk/anthropic","options":{"timeout":1000}}},"model":"p/m"}`,
		`{"provider":{"p":{"options":{"timeout":"soon"}}}}`, `{"permission":{"bash":{"*":"ask"}}}`, `{"permission":"deny"}`,
		`{"provider":{"p":{"models":{"m":{"id":"real-m"}}}},"model":"p/m"}`, `{"apiKey":"{env:HOME}"}`, `[`, `null`,
		"{\"model\": // c\n \"a/b\",}", `{"modle":"a/b","agent":{"b":{"tempreature":1}}}`, `{"provider":{"p":{"models":{"m":[1]}}}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cfg, err := Parse([]byte(s))
		if err != nil {
			return
		}
		_, _, _ = cfg.Build()
		_, _ = permission.ParseConfig(cfg.Permission)
	})
}

func TestValidateNumbers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		doc  string
		want string
	}{
		{`{"agentd":{"maxSteps":-5}}`, "agentd.maxSteps -5"},
		{`{"agentd":{"retry":{"maxAttempts":-1}}}`, "agentd.retry.maxAttempts"},
		{`{"agentd":{"retry":{"maxElapsed":"-3s"}}}`, "agentd.retry.maxElapsed"},
		{`{"agentd":{"events":{"maxAge":"soon"}}}`, "agentd.events.maxAge"},
		{`{"agentd":{"events":{"maxCount":-1}}}`, "agentd.events.maxCount"},
		{`{"agent":{"build":{"temperature":7}}}`, "agent.build.temperature"},
		{`{"agent":{"build":{"steps":-2}}}`, "agent.build.steps"},
		{`{"provider":{"p":{"models":{"m":{"limit":{"context":-1}}}}}}`, "provider.p.models.m.limit"},
		{`{"agentd":{"mcp":{"add":"local"}}}`, "agentd.mcp.add"},
		{`{"agentd":{"mcp":{"add":"remote","lazy":true}}}`, ""},
		{`{"agentd":{"maxSteps":5,"retry":{"maxAttempts":3,"maxElapsed":"2m"}}}`, ""},
		{`{"provider":{"p":{"models":{"m":{"modalities":{"input":["text","picture"]}}}}}}`, `provider.p.models.m.modalities: "picture"`},
	} {
		f, err := Parse([]byte(c.doc))
		if err != nil {
			t.Fatalf("%s: %v", c.doc, err)
		}
		err = f.Validate()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.doc, err, c.want)
		}
	}
}

// What a model takes besides text comes from opencode's modalities, else
// its attachment flag, else agentd's table of known models (a model
// outside it takes text only); the scripted model takes everything.
func TestModelInput(t *testing.T) {
	t.Parallel()
	f, err := Parse([]byte(`{"provider":{"p":{"npm":"@ai-sdk/openai-compatible","options":{"baseURL":"http://127.0.0.1:1/v1"},"models":{
		"eyes":{"modalities":{"input":["text","image"],"output":["text"]}},
		"docs":{"attachment":true},
		"blind":{"attachment":true,"modalities":{"input":["text"],"output":["text"]}},
		"local":{},
		"gpt-4.1-mini":{}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	reg, _, err := f.Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ref        string
		image, pdf bool
	}{
		{"p/eyes", true, false}, {"p/docs", true, true}, {"p/blind", false, false},
		{"p/local", false, false}, {"p/gpt-4.1-mini", true, true}, {"agentd/scripted", true, true},
	} {
		ref, _ := ParseModel(c.ref)
		_, m, err := reg.Resolve(ref)
		if err != nil {
			t.Fatal(err)
		}
		if m.Takes("image") != c.image || m.Takes("pdf") != c.pdf || !m.Takes("text") {
			t.Errorf("%s takes image %v, pdf %v; want %v, %v", c.ref, m.Takes("image"), m.Takes("pdf"), c.image, c.pdf)
		}
	}
}
