package torture

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/sqlite"
)

// TestKillDuringRevert kills agentd (SIGKILL) while a revert is under way
// (a git in front of the real one holds the revert's restore of the
// files, after its journal is written), restarts it, and checks that
// the start finished the revert before serving: the files reverted, the
// revert point written, a revert.updated event saying it was recovered;
// and that the session takes prompts again.
func TestKillDuringRevert(t *testing.T) {
	real, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	bin, ctl := t.TempDir(), t.TempDir()
	script := `#!/bin/sh
for a in "$@"; do
  if { [ "$a" = cat-file ] || [ "$a" = checkout ]; } && [ -e "` + ctl + `/arm" ]; then
    touch "` + ctl + `/held"
    while [ ! -e "` + ctl + `/release" ]; do sleep 0.02; done
  fi
done
exec "` + real + `" "$@"
`
	if err := os.WriteFile(filepath.Join(bin, "git"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	release := func() { os.WriteFile(filepath.Join(ctl, "release"), nil, 0o644) }
	t.Cleanup(release)

	srv, c, dbPath := crashNode(t, 20*time.Millisecond, `{"limit":{"context":100000,"output":4000}}`)
	ctx := t.Context()
	ws := srv.dir
	for _, f := range []string{"a.txt", "b.txt"} {
		os.WriteFile(filepath.Join(ws, f), []byte("v1\n"), 0o644)
	}
	s, err := c.CreateSession(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	step, _ := json.Marshal(map[string]string{"command": "echo v2 > a.txt; echo v2 > b.txt; echo new > c.txt"})
	if _, err := c.Send(ctx, s.ID, client.Prompt{Text: "tool:bash:" + string(step) + "\nreply:done"}); err != nil {
		t.Fatal(err)
	}
	msgs, err := c.Messages(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(ctl, "arm"), nil, 0o644)
	go func() { _, _ = c.Revert(ctx, s.ID, msgs[0].Info.ID, "") }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		// The wrapper is another process: its mark is polled.
		if _, err := os.Stat(filepath.Join(ctl, "held")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the revert never read the files' contents; log:\n%s", srv.logTail())
		}
		time.Sleep(10 * time.Millisecond)
	}
	srv.kill()
	os.Remove(filepath.Join(ctl, "arm"))
	release()
	srv.start()

	got, err := c.Session(ctx, s.ID)
	if err != nil || got.Revert == nil || got.Revert.MessageID != msgs[0].Info.ID {
		t.Fatalf("after the restart the revert point is %+v (%v)", got.Revert, err)
	}
	for f, want := range map[string]string{"a.txt": "v1\n", "b.txt": "v1\n"} {
		if b, _ := os.ReadFile(filepath.Join(ws, f)); string(b) != want {
			t.Errorf("%s = %q after the restart", f, b)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "c.txt")); !os.IsNotExist(err) {
		t.Errorf("c.txt, made by the reverted step, is still there: %v", err)
	}
	if _, err := c.Send(ctx, s.ID, client.Prompt{Text: "reply:after the revert"}); err != nil {
		t.Fatal(err)
	}
	srv.stop()
	checkStore(t, dbPath)
	st, err := sqlite.Open(ctx, dbPath, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	evs, err := st.Events(ctx, store.EventQuery{SessionID: s.ID})
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, ev := range evs {
		if ev.Type == core.EventRevertUpdated {
			var p struct {
				State     string `json:"state"`
				Recovered bool   `json:"recovered"`
			}
			json.Unmarshal(ev.Properties, &p)
			if p.Recovered {
				p.State += "(recovered)"
			}
			states = append(states, p.State)
		}
	}
	if len(states) != 2 || states[0] != "started" || states[1] != "finished(recovered)" {
		t.Errorf("revert.updated states: %v", states)
	}
}
