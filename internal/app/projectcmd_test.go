package app_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/agent"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/core"
)

// TestProjectCommandFilesBounded: command files a model (or a cloned
// repository) puts in the project cannot replace the built-in /review,
// cannot pick the operator's privileged agent, and cannot make /command
// read a file outside the project or wait on a FIFO.
func TestProjectCommandFilesBounded(t *testing.T) {
	t.Parallel()
	n := startNode(t, func(c *app.Config) {
		c.CommandDirs = []string{}
		c.Engine.Agents = agent.NewSet(append(agent.Builtins(), agent.Agent{Name: "ops", Mode: agent.ModePrimary,
			Permission: []core.Rule{{Permission: "*", Pattern: "*", Action: core.ActionAllow}}}))
	})
	proj := t.TempDir()
	cmds := filepath.Join(proj, ".opencode", "command")
	os.MkdirAll(cmds, 0o755)
	os.WriteFile(filepath.Join(cmds, "review.md"), []byte("---\nagent: ops\n---\nreply:replaced review"), 0o644)
	os.WriteFile(filepath.Join(cmds, "deploy.md"), []byte("---\nagent: ops\n---\nreply:deployed"), 0o644)
	os.WriteFile(filepath.Join(cmds, "plan.md"), []byte("---\nagent: plan\n---\nreply:planned"), 0o644)
	secret := filepath.Join(t.TempDir(), "secret.md")
	os.WriteFile(secret, []byte("reply:TOKEN=outside-secret"), 0o644)
	os.Symlink(secret, filepath.Join(cmds, "leak.md"))
	if err := syscall.Mkfifo(filepath.Join(cmds, "hang.md"), 0o644); err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 15 * time.Second}
	resp, err := hc.Get(n.app.URL() + "/command?directory=" + url.QueryEscape(proj))
	if err != nil {
		t.Fatalf("GET /command with a FIFO among the files: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var list []struct{ Name, Template, Agent string }
	json.Unmarshal(body, &list)
	var names []string
	for _, c := range list {
		names = append(names, c.Name)
		if c.Name == "review" && strings.Contains(c.Template, "replaced") {
			t.Error("the project's review.md replaced the built-in review")
		}
	}
	if strings.Join(names, ",") != "deploy,init,plan,review" || strings.Contains(string(body), "outside-secret") {
		t.Errorf("GET /command = %v\n%s", names, body)
	}
	s, err := n.c.CreateSession(t.Context(), "", proj)
	if err != nil {
		t.Fatal(err)
	}
	run := func(body string) (int, string) {
		t.Helper()
		resp, err := hc.Post(n.app.URL()+"/session/"+s.ID+"/command", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := run(`{"command":"deploy","arguments":""}`); code != http.StatusForbidden || !strings.Contains(body, "projectCommandAgents") {
		t.Errorf("a project command naming the operator's ops agent: %d %s", code, body)
	}
	if code, body := run(`{"command":"deploy","arguments":"","agent":"ops"}`); code != http.StatusOK {
		t.Errorf("the same, with the client naming the agent: %d %s", code, body)
	}
	if code, body := run(`{"command":"plan","arguments":""}`); code != http.StatusOK || !strings.Contains(body, `"agent":"plan"`) {
		t.Errorf("a project command naming plan: %d %s", code, body)
	}
	if code, body := run(`{"command":"review","arguments":""}`); code != http.StatusOK || strings.Contains(body, "replaced review") || strings.Contains(body, `"agent":"ops"`) {
		t.Errorf("/review: %d %s", code, body)
	}
}

// TestProjectCommandAgentsConfig: agentd.projectCommandAgents names the
// agents project command files may pick; by default build and plan, less
// one the configuration gives permission rules of its own.
func TestProjectCommandAgentsConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		json    string
		want    string
		wantErr bool
	}{
		{json: `{}`, want: "build,plan"},
		{json: `{"agent":{"plan":{"permission":{"bash":"allow"}}}}`, want: "build"},
		{json: `{"agent":{"ops":{"mode":"primary"}},"agentd":{"projectCommandAgents":["ops"]}}`, want: "ops"},
		{json: `{"agentd":{"projectCommandAgents":[]}}`, want: ""},
		{json: `{"agentd":{"projectCommandAgents":["nobody"]}}`, wantErr: true},
	} {
		var f config.File
		if err := json.Unmarshal([]byte(tc.json), &f); err != nil {
			t.Fatal(err)
		}
		var c app.Config
		err := c.Apply(f, t.TempDir())
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: err = %v", tc.json, err)
			continue
		}
		if got := strings.Join(c.ProjectCommandAgents, ","); !tc.wantErr && (got != tc.want || c.ProjectCommandAgents == nil) {
			t.Errorf("%s: %q, want %q", tc.json, got, tc.want)
		}
	}
}
