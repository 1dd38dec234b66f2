package app_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/core"
)

// TestHiddenArithmeticAsks: with the default rules and no grant, a script
// whose code hides in a variable's value — (( x )) evaluates the
// subscript of x='a[$(touch pwned)0]' — asks instead of running: rejected,
// nothing ran; allowed once, the hidden command does run (it is real).
func TestHiddenArithmeticAsks(t *testing.T) {
	t.Parallel()
	n := startNode(t, func(c *app.Config) { c.Engine.Permission = nil })
	ctx := t.Context()
	sid := n.session()
	in, _ := json.Marshal(map[string]string{"command": `x='a[$(touch pwned)0]'; (( x ))`})
	pwned := filepath.Join(n.cfg.Directory, "pwned")
	for _, reply := range []string{"reject", "once"} {
		if err := n.c.SendAsync(ctx, sid, client.Prompt{Text: "tool:bash:" + string(in)}); err != nil {
			t.Fatal(err)
		}
		req := n.waitPermission(sid)
		if req.Permission != "bash" || !slices.Contains(req.Patterns, "(( x ))") || slices.Contains(req.Always, "(( x ))") {
			t.Errorf("asked %+v", req)
		}
		if _, err := os.Stat(pwned); !os.IsNotExist(err) {
			t.Fatalf("the hidden command ran before the answer: %v", err)
		}
		if err := n.c.ReplyPermission(ctx, req.ID, reply, ""); err != nil {
			t.Fatal(err)
		}
		n.waitIdle(sid)
		_, err := os.Stat(pwned)
		if reply == "reject" && !os.IsNotExist(err) || reply == "once" && err != nil {
			t.Errorf("after %s, pwned: %v", reply, err)
		}
	}
}

// TestShellDenyRulesSeeWrappers: the operator's deny rule on "rm *"
// holds for the user's /shell whatever wraps the rm, and for a script
// piped into a shell, whose commands cannot be checked.
func TestShellDenyRulesSeeWrappers(t *testing.T) {
	t.Parallel()
	n := startNode(t, func(c *app.Config) {
		c.Engine.Permission = []core.Rule{{Permission: "bash", Pattern: "rm *", Action: core.ActionDeny}}
	})
	ctx := t.Context()
	sid := n.session()
	keep := filepath.Join(n.cfg.Directory, "keep.txt")
	if err := os.WriteFile(keep, []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"nice rm -f keep.txt", "command rm keep.txt", "env -i rm keep.txt",
		"timeout 5 rm keep.txt", "echo 'rm keep.txt' | sh"} {
		m, err := n.c.Shell(ctx, sid, "build", cmd)
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		var call *core.Part
		for i := range m.Parts {
			if m.Parts[i].Type == core.PartTool {
				call = &m.Parts[i]
			}
		}
		if call == nil || !strings.Contains(call.State.Error+call.State.Output, "permission denied") {
			t.Errorf("%s: %+v", cmd, m.Parts)
		}
		if _, err := os.Stat(keep); err != nil {
			t.Fatalf("%s removed the file: %v", cmd, err)
		}
	}
	// What the rules allow still runs.
	if _, err := n.c.Shell(ctx, sid, "build", "nice touch made.txt"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(n.cfg.Directory, "made.txt")); err != nil {
		t.Errorf("an allowed wrapped command did not run: %v", err)
	}
}
