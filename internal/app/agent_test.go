package app_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/fakellm"
)

// modelNode starts agentd with fakellm (recording every request) as the
// provider "fake", configured with extra (more top-level keys of
// agentd.json) and the model block model.
func modelNode(t *testing.T, npm, model, extra string, opts ...option) (*node, *fakellm.Server) {
	t.Helper()
	fake := fakellm.New(fakellm.Options{Second: 50 * time.Millisecond, Record: true})
	hs := httptest.NewServer(fake.Handler())
	t.Cleanup(hs.Close)
	if model == "" {
		model = `{"name": "Fake Model", "limit": {"context": 100000, "output": 4096}}`
	}
	block := fmt.Sprintf(`{
	  "model": "fake/fake-model",
	  "provider": {"fake": {"npm": %q, "name": "Fake", "options": {"baseURL": %q, "apiKey": "k"},
	    "models": {"fake-model": %s, "small": {"name": "Small"}}}}%s
	}`, npm, hs.URL+"/v1", model, extra)
	f, err := config.Parse([]byte(block))
	if err != nil {
		t.Fatal(err)
	}
	n := startNode(t, append([]option{func(c *app.Config) {
		if err := c.Apply(f, c.Directory); err != nil {
			t.Fatal(err)
		}
		c.Engine.GlobalDir = t.TempDir()
		c.Engine.OutputDir = t.TempDir()
	}}, opts...)...)
	return n, fake
}

// lastRequest is the newest step request fakellm received (title and
// summary requests apart).
func lastRequest(t *testing.T, fake *fakellm.Server) fakellm.Recorded {
	t.Helper()
	rec := fake.Recorded()
	for i := len(rec) - 1; i >= 0; i-- {
		if rec[i].Request.Purpose == "" {
			return rec[i]
		}
	}
	t.Fatal("no model request was made")
	return fakellm.Recorded{}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSystemPrompt checks what the model is told: agentd's prompt, the
// instructions (global, configured, the project's AGENTS.md files from
// the repository root down), the environment and the prompt's own system
// text, stable parts first; with Anthropic, cache breakpoints too.
func TestSystemPrompt(t *testing.T) {
	t.Parallel()
	for _, npm := range providerKinds {
		t.Run(npm, func(t *testing.T) {
			t.Parallel()
			repo := t.TempDir()
			write(t, filepath.Join(repo, ".git", "HEAD"), "ref: refs/heads/feature-x\n")
			write(t, filepath.Join(repo, "AGENTS.md"), "ROOT-MARKER: use tabs.")
			write(t, filepath.Join(repo, "pkg", "AGENTS.md"), "SUB-MARKER: no globals.")
			write(t, filepath.Join(repo, "pkg", "docs", "style.md"), "STYLE-MARKER: short names.")
			n, fake := modelNode(t, npm, "", `, "instructions": ["docs/*.md"]`, func(c *app.Config) {
				c.Directory = filepath.Join(repo, "pkg")
			})
			write(t, filepath.Join(n.cfg.Engine.GlobalDir, "AGENTS.md"), "GLOBAL-MARKER: be brief.")
			sid := n.session()
			if _, err := n.c.Send(t.Context(), sid, client.Prompt{Text: "reply:ok", System: "EXTRA-MARKER"}); err != nil {
				t.Fatal(err)
			}
			req := lastRequest(t, fake)
			sys := strings.Join(req.Request.System, "\n")
			order := []string{"You are a coding agent run by agentd", "GLOBAL-MARKER", "STYLE-MARKER", "ROOT-MARKER", "SUB-MARKER",
				"Working directory: " + filepath.Join(repo, "pkg"), "branch feature-x", time.Now().Format("2 January 2006"),
				"Model: fake/fake-model", "EXTRA-MARKER"}
			at := -1
			for _, want := range order {
				i := strings.Index(sys, want)
				if i < 0 {
					t.Fatalf("the system prompt lacks %q:\n%s", want, sys)
				}
				if i < at {
					t.Errorf("%q is out of order", want)
				}
				at = i
			}
			if !strings.Contains(sys, filepath.Join(repo, "AGENTS.md")) {
				t.Error("instructions are not labelled with their path")
			}
			offered := map[string]bool{}
			for _, tl := range req.Request.Tools {
				offered[tl.Name] = tl.Description != "" && len(tl.Schema) > 0
			}
			for _, name := range []string{"bash", "read", "write", "edit", "glob", "grep", "list"} {
				if !offered[name] {
					t.Errorf("tool %s was not offered with a description and schema", name)
				}
			}
			if npm == "@ai-sdk/anthropic" {
				var body struct {
					System   []map[string]any `json:"system"`
					Messages []struct {
						Content []map[string]any `json:"content"`
					} `json:"messages"`
				}
				if err := json.Unmarshal(req.Body, &body); err != nil {
					t.Fatal(err)
				}
				if body.System[len(body.System)-1]["cache_control"] == nil {
					t.Error("no cache breakpoint after the system prompt")
				}
				last := body.Messages[len(body.Messages)-1].Content
				if last[len(last)-1]["cache_control"] == nil {
					t.Error("no cache breakpoint on the newest message")
				}
			}
		})
	}
}

// TestClaudeMDWhenNoAgentsMD: a project without AGENTS.md gets its
// CLAUDE.md.
func TestClaudeMDWhenNoAgentsMD(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "CLAUDE.md"), "CLAUDE-MARKER")
	n, fake := modelNode(t, providerKinds[0], "", "", func(c *app.Config) { c.Directory = dir })
	n.send(n.session(), "reply:ok")
	if sys := strings.Join(lastRequest(t, fake).Request.System, "\n"); !strings.Contains(sys, "CLAUDE-MARKER") {
		t.Errorf("CLAUDE.md was not read:\n%s", sys)
	}
}

// TestAgents: the plan agent cannot write; a configured agent's tools,
// temperature and steps are applied; an unknown agent is refused at
// admission.
func TestAgents(t *testing.T) {
	t.Parallel()
	n, fake := modelNode(t, providerKinds[0], "", `, "agent": {
		"careful": {"mode": "primary", "prompt": "CAREFUL-MARKER", "tools": {"bash": false, "write": false},
			"temperature": 0.25, "top_p": 0.5, "steps": 2},
		"helper": {"mode": "subagent"}}`)
	sid := n.session()
	ctx := t.Context()

	m, err := n.c.Send(ctx, sid, client.Prompt{Text: `tool:write:{"filePath":"planned.txt","content":"x"}`, Agent: "plan"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(n.cfg.Directory, "planned.txt")); err == nil {
		t.Error("the plan agent wrote a file")
	}
	if !strings.Contains(textOf(m), "permission denied") {
		t.Errorf("the plan agent's write was not denied: %q", textOf(m))
	}
	req := lastRequest(t, fake).Request
	if !strings.Contains(strings.Join(req.System, "\n"), "You are in plan mode") {
		t.Error("the plan agent's prompt is missing")
	}

	if _, err := n.c.Send(ctx, sid, client.Prompt{Text: "reply:ok", Agent: "careful"}); err != nil {
		t.Fatal(err)
	}
	rec := lastRequest(t, fake)
	var body struct {
		Temperature float64 `json:"temperature"`
		TopP        float64 `json:"top_p"`
	}
	json.Unmarshal(rec.Body, &body)
	if body.Temperature != 0.25 || body.TopP != 0.5 {
		t.Errorf("sampling = %+v", body)
	}
	for _, tl := range rec.Request.Tools {
		if tl.Name == "bash" || tl.Name == "write" {
			t.Errorf("disabled tool %s was offered", tl.Name)
		}
	}
	if !strings.Contains(strings.Join(rec.Request.System, "\n"), "CAREFUL-MARKER") {
		t.Error("the configured agent's prompt is missing")
	}
	// steps: 2 — a third model call ends the run failed/max_steps.
	_, err = n.c.Send(ctx, sid, client.Prompt{Text: "tool:list:{}\ntool:glob:{\"pattern\":\"*\"}\nreply:done", Agent: "careful"})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.StatusCode != 500 {
		t.Errorf("a run past its agent's steps answered %v", err)
	}
	if st := n.status(sid); st.Last.Reason != core.ReasonMaxSteps {
		t.Errorf("run ended %s/%s", st.Last.Outcome, st.Last.Reason)
	}
	// The runs record their agent, and so do the answers.
	msgs := mustMessages(t, n, sid)
	if last := msgs[len(msgs)-1].Info; last.Agent != "careful" || last.Mode != "careful" {
		t.Errorf("answer's agent = %q/%q", last.Agent, last.Mode)
	}

	for _, a := range []string{"nosuch", "helper"} {
		_, err := n.c.Send(ctx, sid, client.Prompt{Text: "reply:x", Agent: a})
		if !errors.As(err, &ce) || ce.StatusCode != 400 || !strings.Contains(ce.Message, "agent") {
			t.Errorf("agent %q: %v", a, err)
		}
	}
	var agents []struct {
		Name string `json:"name"`
		Mode string `json:"mode"`
	}
	if err := getJSON(n, "/agent", &agents); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, a := range agents {
		names[a.Name] = a.Mode
	}
	if names["build"] != "primary" || names["plan"] != "primary" || names["general"] != "subagent" || names["careful"] != "primary" {
		t.Errorf("GET /agent = %v", names)
	}
}

// TestToolOutputBounded: a tool call cannot flood the context: a 100,000
// line output is cut with a note naming the file holding all of it, which
// the read tool may then read in pieces without asking.
func TestToolOutputBounded(t *testing.T) {
	t.Parallel()
	n, fake := modelNode(t, providerKinds[0], "", `, "permission": {"bash": "allow"}`)
	var sb strings.Builder
	for i := range 100000 {
		fmt.Fprintf(&sb, "line %d\n", i)
	}
	write(t, filepath.Join(n.cfg.Directory, "big.txt"), sb.String())
	sid := n.session()
	n.send(sid, `tool:bash:{"command":"cat big.txt"}`)
	var out string
	for _, m := range fake.Recorded() {
		for _, msg := range m.Request.Messages {
			for _, c := range msg.Content {
				if c.Type == "tool_result" {
					out = c.Text
				}
			}
		}
	}
	if len(out) > 60000 || !strings.Contains(out, "output cut: the first 2000 of 100001 lines") {
		t.Fatalf("tool result sent to the model: %d bytes, ends %q", len(out), out[max(0, len(out)-300):])
	}
	i := strings.Index(out, "The whole output is in ")
	path := strings.TrimSpace(strings.SplitN(out[i+len("The whole output is in "):], ":", 2)[0])
	if b, err := os.ReadFile(path); err != nil || len(b) != sb.Len() {
		t.Fatalf("saved output %s: %d bytes, %v", path, len(b), err)
	}
	m := n.send(sid, fmt.Sprintf(`tool:read:{"filePath":%q,"offset":50000,"limit":2}`, path))
	if !strings.Contains(textOf(m), "line 50000") {
		t.Errorf("reading the saved output: %q", textOf(m))
	}
	// Another session's tools do not read it without asking.
	other := n.session()
	if err := n.c.SendAsync(t.Context(), other, client.Prompt{Text: fmt.Sprintf(`tool:read:{"filePath":%q,"limit":2}`, path)}); err != nil {
		t.Fatal(err)
	}
	if req := n.waitPermission(other); req.Permission != "external_directory" {
		t.Errorf("another session reading the output asked %+v", req)
	}
}

// TestToolOutputPrivate: the node keeps cut output beside its database in
// a folder only its user can enter, not in a shared temporary directory.
func TestToolOutputPrivate(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	st, err := os.Stat(n.cfg.DBPath + ".tool-output")
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("tool output folder: %v %v", st, err)
	}
}

// TestTitle: the first prompt gets a title from the small model, through
// the provider's HTTP API, off the run's path. That a later prompt, or a
// session whose title a person set, asks for no title is pinned in the
// engine, where the title writers can be waited for instead of slept on
// (engine's TestTitleFromTheFirstPromptOnly).
func TestTitle(t *testing.T) {
	t.Parallel()
	n, fake := modelNode(t, providerKinds[0], "", `, "small_model": "fake/small"`)
	sid := n.session()
	n.send(sid, "title:Fix the flaky parser test\nreply:ok")
	n.waitTitle(sid, "Fix the flaky parser test")
	titles := 0
	for _, r := range fake.Recorded() {
		if r.Request.Purpose == "title" {
			titles++
			var body struct {
				Model string `json:"model"`
			}
			json.Unmarshal(r.Body, &body)
			if body.Model != "small" {
				t.Errorf("title written by %q, not the small model", body.Model)
			}
		}
	}
	if titles != 1 {
		t.Errorf("%d title requests, want 1", titles)
	}
}

// TestUsageAndCost: tokens and cost on steps, messages and the session,
// from the configured price; and for Anthropic, cache reads counted.
func TestUsageAndCost(t *testing.T) {
	t.Parallel()
	for _, npm := range providerKinds {
		t.Run(npm, func(t *testing.T) {
			t.Parallel()
			n, _ := modelNode(t, npm, `{"name": "Fake", "limit": {"context": 100000, "output": 4096},
				"cost": {"input": 2, "output": 8, "cache_read": 0.5, "cache_write": 1}}`, "")
			sid := n.session()
			m := n.send(sid, "usage:1000,500,200,100\nreply:counted")
			want := (1000*2 + 500*8 + 200*0.5 + 100*1) / 1e6
			fin := partOf(m, core.PartStepFinish)
			if fin.Tokens.Input != 1000 || fin.Tokens.Output != 500 || fin.Tokens.Cache.Read != 200 || fin.Tokens.Cache.Write != 100 {
				t.Errorf("step tokens = %+v", fin.Tokens)
			}
			if math.Abs(fin.Cost-want) > 1e-12 || math.Abs(m.Info.Cost-want) > 1e-12 {
				t.Errorf("cost: step %v, message %v, want %v", fin.Cost, m.Info.Cost, want)
			}
			n.send(sid, "usage:1000,500,200,100\nreply:again")
			s, err := n.app.Store.Session(t.Context(), sid)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(s.Cost-2*want) > 1e-12 || s.Tokens.Input != 2000 || s.Tokens.Cache.Read != 400 {
				t.Errorf("session totals: cost %v tokens %+v", s.Cost, s.Tokens)
			}
			// A run of two steps adds both to the session, once.
			n.send(sid, "usage:1000,500,200,100\ntool:list:{}\nreply:two steps")
			if s, err = n.app.Store.Session(t.Context(), sid); err != nil {
				t.Fatal(err)
			}
			if math.Abs(s.Cost-4*want) > 1e-12 || s.Tokens.Input != 4000 || s.Tokens.Output != 2000 {
				t.Errorf("session totals after a two-step run: cost %v tokens %+v", s.Cost, s.Tokens)
			}
		})
	}
}

// TestBuiltInPrice: a well-known model without a configured price is
// priced from the built-in table.
func TestBuiltInPrice(t *testing.T) {
	t.Parallel()
	n, _ := modelNode(t, providerKinds[0], `{"id": "gpt-4.1-mini", "limit": {"context": 100000, "output": 4096}}`, "")
	m := n.send(n.session(), "usage:1000000,0\nreply:x")
	if math.Abs(m.Info.Cost-0.40) > 1e-9 {
		t.Errorf("cost of a million input tokens of gpt-4.1-mini = %v, want 0.40", m.Info.Cost)
	}
}

func getJSON(n *node, path string, out any) error {
	resp, err := n.c.HTTPClient().Get(n.app.URL() + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(out)
}

// TestModelOptionsAndVariants: a model's options and the variant a prompt
// picks reach the provider (OpenAI's reasoning effort, Anthropic's
// thinking budget).
func TestModelOptionsAndVariants(t *testing.T) {
	t.Parallel()
	t.Run("openai", func(t *testing.T) {
		t.Parallel()
		n, fake := modelNode(t, providerKinds[0], `{"limit": {"context": 100000, "output": 4096},
			"options": {"reasoningEffort": "low"}, "variants": {"deep": {"reasoningEffort": "high"}}}`, "")
		sid := n.session()
		effort := func() string {
			var body struct {
				Effort string `json:"reasoning_effort"`
			}
			json.Unmarshal(lastRequest(t, fake).Body, &body)
			return body.Effort
		}
		n.send(sid, "reply:x")
		if e := effort(); e != "low" {
			t.Errorf("reasoning effort = %q, want the model's low", e)
		}
		if _, err := n.c.Send(t.Context(), sid, client.Prompt{Text: "reply:y", Variant: "deep"}); err != nil {
			t.Fatal(err)
		}
		if e := effort(); e != "high" {
			t.Errorf("reasoning effort = %q, want the variant's high", e)
		}
	})
	t.Run("anthropic", func(t *testing.T) {
		t.Parallel()
		n, fake := modelNode(t, providerKinds[1], `{"limit": {"context": 100000, "output": 4096},
			"options": {"thinking": {"type": "enabled", "budgetTokens": 2048}}}`, "")
		n.send(n.session(), "reply:x")
		var body struct {
			Thinking struct {
				Type   string `json:"type"`
				Budget int    `json:"budget_tokens"`
			} `json:"thinking"`
		}
		json.Unmarshal(lastRequest(t, fake).Body, &body)
		if body.Thinking.Type != "enabled" || body.Thinking.Budget != 2048 {
			t.Errorf("thinking = %+v", body.Thinking)
		}
	})
}
