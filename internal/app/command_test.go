package app_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
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
	if len(list) != 3 || list[0].Name != "echo" || list[0].Description != "Say it back" || list[1].Template != "reply:from the configuration" {
		t.Fatalf("GET /command = %+v", list)
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
