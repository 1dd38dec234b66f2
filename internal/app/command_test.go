package app_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/command"
	"github.com/agentd/agentd/internal/core"
)

// TestCommands: commands from the configuration and from command files are
// listed by GET /command, and POST /session/{id}/command runs the
// template with the arguments, with the command's agent unless the
// request names one.
func TestCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "echo.md"), []byte("---\ndescription: Say it back\nagent: plan\n---\nreply:$ARGUMENTS\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "shadowed.md"), []byte("reply:from the file"), 0o644)
	n := startNode(t, func(c *app.Config) {
		c.CommandDirs = []string{dir, filepath.Join(dir, "missing")}
		c.Commands = command.Set{
			"shadowed": {Name: "shadowed", Template: "reply:from the configuration"},
			"swap":     {Name: "swap", Template: "reply:$2 $1"},
		}
	})
	resp, err := http.Get(n.app.URL() + "/command")
	if err != nil {
		t.Fatal(err)
	}
	var list []command.Command
	json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	var names []string
	for _, c := range list {
		names = append(names, c.Name)
	}
	if strings.Join(names, ",") != "echo,init,review,shadowed,swap" || list[0].Description != "Say it back" || list[3].Template != "reply:from the configuration" {
		t.Fatalf("GET /command = %v", names)
	}
	sid := n.session()
	run := func(body string) (int, core.MessageWithParts) {
		t.Helper()
		resp, err := http.Post(n.app.URL()+"/session/"+sid+"/command", "application/json", bytes.NewBufferString(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m core.MessageWithParts
		json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	for _, tc := range []struct{ body, text, agent string }{
		{`{"command":"echo","arguments":"hello there"}`, "hello there", "plan"},
		{`{"command":"echo","arguments":"again","agent":"build"}`, "again", "build"},
		{`{"command":"swap","arguments":"world hello"}`, "hello world", "build"},
		{`{"command":"shadowed","arguments":""}`, "from the configuration", "build"},
	} {
		code, m := run(tc.body)
		text := ""
		for _, p := range m.Parts {
			if p.Type == core.PartText && !p.Synthetic {
				text += p.Text
			}
		}
		if code != http.StatusOK || text != tc.text || m.Info.Agent != tc.agent {
			t.Errorf("%s: %d %q by %q, want %q by %q", tc.body, code, text, m.Info.Agent, tc.text, tc.agent)
		}
	}
	if code, _ := run(`{"command":"nope","arguments":""}`); code != http.StatusNotFound {
		t.Errorf("unknown command: %d, want 404", code)
	}
	if code, _ := run(`{"command":"echo","arguments":"x","model":"no-slash"}`); code != http.StatusBadRequest {
		t.Errorf("bad model: %d, want 400", code)
	}
}

// TestProjectCommands: the commands of a session's own directory (its
// .opencode/command folder) are found, picked up when a file changes, and
// dropped with POST /instance/dispose; the built-in init runs through the
// model and writes AGENTS.md.
func TestProjectCommands(t *testing.T) {
	t.Parallel()
	n := startNode(t, func(c *app.Config) { c.CommandDirs = []string{} })
	proj := t.TempDir()
	cmds := filepath.Join(proj, ".opencode", "command")
	os.MkdirAll(cmds, 0o755)
	os.WriteFile(filepath.Join(cmds, "hello.md"), []byte("reply:hello from the project"), 0o644)
	list := func(dir string) []string {
		resp, err := http.Get(n.app.URL() + "/command?directory=" + url.QueryEscape(dir))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var l []command.Command
		json.NewDecoder(resp.Body).Decode(&l)
		var names []string
		for _, c := range l {
			names = append(names, c.Name)
		}
		return names
	}
	if got := strings.Join(list(proj), ","); got != "hello,init,review" {
		t.Errorf("project commands = %s", got)
	}
	if got := strings.Join(list(n.cfg.Directory), ","); got != "init,review" {
		t.Errorf("another directory's commands = %s", got)
	}
	os.WriteFile(filepath.Join(cmds, "later.md"), []byte("reply:added later"), 0o644)
	if got := strings.Join(list(proj), ","); got != "hello,init,later,review" {
		t.Errorf("after a new file = %s", got)
	}
	resp, err := http.Post(n.app.URL()+"/instance/dispose?directory="+url.QueryEscape(proj), "application/json", nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("dispose: %v %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	s, err := n.c.CreateSession(t.Context(), "", proj)
	if err != nil {
		t.Fatal(err)
	}
	resp, err = http.Post(n.app.URL()+"/session/"+s.ID+"/command", "application/json", strings.NewReader(`{"command":"hello","arguments":""}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("project command in its session: %v %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	// init's template goes to the model as the prompt.
	resp, err = http.Post(n.app.URL()+"/session/"+s.ID+"/init", "application/json", strings.NewReader(`{}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("init: %v %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	msgs := mustMessages(t, n, s.ID)
	var prompts []string
	for _, m := range msgs {
		if m.Info.Role == core.RoleUser {
			prompts = append(prompts, textOf(m))
		}
	}
	if len(prompts) != 2 || !strings.Contains(prompts[1], "AGENTS.md") {
		t.Errorf("prompts = %q", prompts)
	}
}
