package app_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/plugin"
	"github.com/agentd/agentd/internal/testenv"
	"github.com/agentd/agentd/internal/tool"
)

// dcp is @tarquinen/opencode-dcp, the most used context-pruning plugin.
const dcp = "@tarquinen/opencode-dcp"

// TestPublishedPluginDCP: @tarquinen/opencode-dcp, unchanged, does its
// job. Its messages transform tags each message of the history with a
// reference (m0001, …) kept by the message's id; its compress tool, which
// the model calls with a range of those references and a summary, reads
// the session's messages through its client and matches them by id; from
// then on the transform replaces the range with the summary. So the model
// sees the summary instead of the earlier tool outputs, while the
// session's record keeps every output. dcp's notice of the compression,
// a prompt without reply of ignored text sent while the run goes on, is
// recorded but never shown to the model (as in opencode).
func TestPublishedPluginDCP(t *testing.T) {
	t.Parallel()
	dir, _ := pluginFolder(t)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", dcp, "package.json")); err != nil {
		testenv.Skip(t, testenv.Plugins, dcp+" is not installed")
	}
	// Its configuration and state live in the host's home (XDG folders);
	// no update checks (no network).
	home := t.TempDir()
	cfgDir := filepath.Join(home, "config", "opencode")
	if err := os.MkdirAll(cfgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfgDir, "dcp.jsonc"), []byte(`{"autoUpdate": false}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := tool.NewEnv(nil, nil).With(map[string]string{"HOME": home,
		"XDG_CONFIG_HOME": filepath.Join(home, "config"), "XDG_DATA_HOME": filepath.Join(home, "data")})
	n, fake, _ := fakeModelNode(t, func(c *app.Config) {
		c.Plugins.Specs, c.Plugins.Dir, c.Plugins.Env = []plugin.Spec{{Spec: dcp, Path: dcp}}, dir, env
		c.Directory = t.TempDir()
	})
	sid := n.session()
	n.send(sid, `tool:echo:{"text":"OUTPUT-ALPHA"}`+"\n"+`tool:echo:{"text":"OUTPUT-BETA"}`+"\nreply:looked at both")

	// The model saw the history tagged with dcp's references.
	recorded := fake.Recorded()
	if last := string(recorded[len(recorded)-1].Body); !strings.Contains(last, "OUTPUT-BETA") || !strings.Contains(last, "m0001") {
		t.Fatalf("the step after the calls sent %s", last)
	}

	// The first prompt is m0001, its three steps m0002 to m0004.
	n.send(sid, `tool:compress:{"topic":"Echo outputs","content":[{"startId":"m0001","endId":"m0004","summary":"SUMMARY-OF-ECHOES"}]}`+"\nreply:compressed")
	p := n.lastToolPart(sid)
	if p == nil || p.Tool != "compress" || p.State.Status != core.ToolCompleted || !strings.Contains(p.State.Output, "Compressed 4 messages") {
		t.Fatalf("the compress call: %+v", p)
	}
	recorded = fake.Recorded()
	last := string(recorded[len(recorded)-1].Body)
	if !strings.Contains(last, "SUMMARY-OF-ECHOES") || strings.Contains(last, "OUTPUT-ALPHA") || strings.Contains(last, "OUTPUT-BETA") ||
		strings.Contains(last, "Compression #1") {
		t.Errorf("the step after compress sent %s", last)
	}

	// The record keeps what the model no longer sees.
	msgs, err := n.c.Messages(t.Context(), sid)
	if err != nil {
		t.Fatal(err)
	}
	var outputs []string
	notice := false
	for _, m := range msgs {
		for _, p := range m.Parts {
			if p.Type == core.PartTool && p.Tool == "echo" {
				outputs = append(outputs, p.State.Output)
			}
			notice = notice || p.Type == core.PartText && p.Ignored && strings.Contains(p.Text, "Compression #1")
		}
	}
	if !notice {
		t.Error("dcp's notice is not in the record as ignored text")
	}
	if strings.Join(outputs, ",") != "OUTPUT-ALPHA,OUTPUT-BETA" {
		t.Errorf("the record's echo outputs: %q", outputs)
	}

	// /dcp-compress, the command its config hook adds: its
	// command.execute.before records the command as the prompt, and its
	// transform asks the model, in that prompt's place, to compress.
	if code, body := n.raw("POST", "/session/"+sid+"/command", `{"command":"dcp-compress","arguments":"the echoes"}`); code != 200 {
		t.Fatalf("/dcp-compress: %d %s", code, body)
	}
	recorded = fake.Recorded()
	if last := string(recorded[len(recorded)-1].Body); !strings.Contains(last, `Additional user focus:\nthe echoes`) {
		t.Errorf("the step after /dcp-compress sent %s", last)
	}
	if msgs, err = n.c.Messages(t.Context(), sid); err != nil {
		t.Fatal(err)
	}
	if prompt := msgs[len(msgs)-2]; !hasText(prompt, "/dcp-compress the echoes") {
		t.Errorf("the command's prompt in the record: %+v", prompt)
	}
}
