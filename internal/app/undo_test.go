package app_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/core"
)

// bash is a scripted prompt that runs one command.
func bash(command string) string {
	b, _ := json.Marshal(map[string]string{"command": command})
	return "tool:bash:" + string(b) + "\nreply:done"
}

func readFile(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return "<missing>"
	}
	return string(b)
}

// TestSnapshotsDiffRevert: a step that may change files records the
// workspace before and after; one that changes files gets a patch part (and its step-finish comes after its
// tool calls); the session's diff names the changes; a revert restores
// the files and hides the messages, an unrevert brings both back, and a
// prompt after a revert drops what was reverted for good.
func TestSnapshotsDiffRevert(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	ctx := t.Context()
	dir := n.cfg.Directory
	os.WriteFile(filepath.Join(dir, "f.txt"), []byte("v1\n"), 0o644)
	sid := n.session()
	n.send(sid, bash("echo v2 > f.txt; echo new > g.txt"))
	n.send(sid, bash("echo v3 > f.txt"))
	if readFile(t, dir, "f.txt") != "v3\n" {
		t.Fatalf("f.txt = %q", readFile(t, dir, "f.txt"))
	}
	msgs := mustMessages(t, n, sid)
	var users []string
	var patches [][]string
	for _, m := range msgs {
		if m.Info.Role == core.RoleUser {
			users = append(users, m.Info.ID)
		}
		var order []string
		for _, p := range m.Parts {
			order = append(order, string(p.Type))
			switch p.Type {
			case core.PartStepFinish:
				if p.Snapshot == "" && strings.Contains(strings.Join(order, ","), "tool") {
					t.Errorf("the step-finish of a bash step has no snapshot")
				}
			case core.PartPatch:
				patches = append(patches, p.Files)
			}
		}
		if strings.Contains(strings.Join(order, ","), "tool") && !strings.HasSuffix(strings.Join(order, ","), "tool,patch,step-finish") {
			t.Errorf("a tool step's parts: %v (want the tool, the patch, then step-finish)", order)
		}
	}
	if len(patches) != 2 || strings.Join(patches[0], ",") != "f.txt,g.txt" || strings.Join(patches[1], ",") != "f.txt" {
		t.Fatalf("patches = %v", patches)
	}
	diff, err := n.c.Diff(ctx, sid, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(diff) != 2 || diff[0].File != "f.txt" || !strings.Contains(diff[0].Patch, "+v3") || diff[1].Status != "added" {
		t.Errorf("session diff = %+v", diff)
	}
	turn, _ := n.c.Diff(ctx, sid, users[1])
	if len(turn) != 1 || !strings.Contains(turn[0].Patch, "-v2") {
		t.Errorf("second turn's diff = %+v", turn)
	}
	if s, _ := n.c.Session(ctx, sid); s.Summary == nil || s.Summary.Files != 2 {
		t.Errorf("summary = %+v", s.Summary)
	}

	// Undo the second turn, then both.
	s, err := n.c.Revert(ctx, sid, users[1], "")
	if err != nil {
		t.Fatal(err)
	}
	if s.Revert == nil || s.Revert.MessageID != users[1] || readFile(t, dir, "f.txt") != "v2\n" {
		t.Fatalf("after undo: revert %+v, f.txt %q", s.Revert, readFile(t, dir, "f.txt"))
	}
	if _, err := n.c.Revert(ctx, sid, users[0], ""); err != nil {
		t.Fatal(err)
	}
	if readFile(t, dir, "f.txt") != "v1\n" || readFile(t, dir, "g.txt") != "<missing>" {
		t.Fatalf("after undoing both: f=%q g=%q", readFile(t, dir, "f.txt"), readFile(t, dir, "g.txt"))
	}
	// The revert point survives a restart, and redo brings everything back.
	n = n.restart()
	if s, _ := n.c.Session(ctx, sid); s.Revert == nil || s.Revert.MessageID != users[0] {
		t.Fatalf("revert after restart: %+v", s.Revert)
	}
	if s, err := n.c.Unrevert(ctx, sid); err != nil || s.Revert != nil {
		t.Fatalf("unrevert: %+v %v", s.Revert, err)
	}
	if readFile(t, dir, "f.txt") != "v3\n" || readFile(t, dir, "g.txt") != "new\n" {
		t.Fatalf("after redo: f=%q g=%q", readFile(t, dir, "f.txt"), readFile(t, dir, "g.txt"))
	}
	// Undo the second turn and prompt: the second turn is dropped.
	if _, err := n.c.Revert(ctx, sid, users[1], ""); err != nil {
		t.Fatal(err)
	}
	n.send(sid, "reply:after the undo")
	after := mustMessages(t, n, sid)
	for _, m := range after {
		if m.Info.ID == users[1] {
			t.Error("the reverted message is still listed after a new prompt")
		}
	}
	if s, _ := n.c.Session(ctx, sid); s.Revert != nil {
		t.Errorf("revert point kept after a new prompt: %+v", s.Revert)
	}
	if runs, _ := n.c.Runs(ctx, sid); len(runs) != 3 {
		t.Errorf("%d runs; the reverted turn's run must stay", len(runs))
	}
	removed := 0
	for _, ev := range n.allEvents() {
		if ev.Type == core.EventMessageRemoved {
			removed++
		}
	}
	if removed != 3 {
		t.Errorf("%d message.removed events, want 3 (the reverted prompt and the two messages of its answer)", removed)
	}
}

// TestRevertRules: unknown sessions and messages are 404, a running
// session is 409 (opencode's SessionBusyError).
func TestRevertRules(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	ctx := t.Context()
	var ce *client.Error
	if _, err := n.c.Revert(ctx, "ses_nope", "msg_nope", ""); !errors.As(err, &ce) || ce.StatusCode != 404 {
		t.Errorf("unknown session: %v", err)
	}
	sid := n.session()
	if _, err := n.c.Revert(ctx, sid, "msg_nope", ""); !errors.As(err, &ce) || ce.StatusCode != 404 {
		t.Errorf("unknown message: %v", err)
	}
	if _, err := n.c.Fork(ctx, "ses_nope", ""); !errors.As(err, &ce) || ce.StatusCode != 404 {
		t.Errorf("fork of an unknown session: %v", err)
	}
	if err := n.c.SendAsync(ctx, sid, client.Prompt{Text: "sleep:30"}); err != nil {
		t.Fatal(err)
	}
	n.waitFor(sid, func(st core.SessionStatus) bool { return st.Type == core.StatusBusy })
	msgs := mustMessages(t, n, sid)
	if _, err := n.c.Revert(ctx, sid, msgs[0].Info.ID, ""); !errors.As(err, &ce) || ce.StatusCode != 409 || ce.Name != "SessionBusyError" {
		t.Errorf("revert while busy: %v", err)
	}
	n.c.Abort(ctx, sid)
}

// TestFork: the fork holds copies of the messages before the given one,
// and its next prompt sends the model only that history.
func TestFork(t *testing.T) {
	t.Parallel()
	n, fake := modelNode(t, providerKinds[0], "", "")
	ctx := t.Context()
	sid := n.session()
	n.send(sid, "reply:first answer")
	n.send(sid, "reply:second answer")
	msgs := mustMessages(t, n, sid)
	f, err := n.c.Fork(ctx, sid, msgs[2].Info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if f.ID == sid || !strings.HasSuffix(f.Title, "(fork)") {
		t.Errorf("fork = %+v", f)
	}
	copied := mustMessages(t, n, f.ID)
	if len(copied) != 2 || copied[0].Info.ID == msgs[0].Info.ID || textOf(copied[1]) != "first answer" || copied[1].Info.ParentID != copied[0].Info.ID {
		t.Fatalf("fork's messages = %d", len(copied))
	}
	for _, p := range copied[1].Parts {
		if p.Type == core.PartIdle {
			t.Error("an idle part of the original's run was copied")
		}
	}
	n.send(f.ID, "reply:in the fork")
	req := lastRequest(t, fake)
	var sent []string
	for _, m := range req.Request.Messages {
		for _, c := range m.Content {
			sent = append(sent, c.Text)
		}
	}
	if all := strings.Join(sent, "|"); strings.Contains(all, "second answer") || !strings.Contains(all, "first answer") {
		t.Errorf("the fork's model was sent: %q", all)
	}
	if runs, _ := n.c.Runs(ctx, f.ID); len(runs) != 1 {
		t.Errorf("fork has %d runs, want its own one", len(runs))
	}
}

// TestShell: the user's own command runs without asking (bash asks by
// default), as a run with an outcome, its output in the bash call's
// metadata; the operator's deny rules still apply; a busy session
// refuses; an abort ends it.
func TestShell(t *testing.T) {
	t.Parallel()
	n := startNode(t, func(c *app.Config) {
		c.Engine.Permission = []core.Rule{{Permission: "bash", Pattern: "rm *", Action: core.ActionDeny}}
	})
	ctx := t.Context()
	sid := n.session()
	m, err := n.c.Shell(ctx, sid, "build", "echo from the shell; echo x > made.txt")
	if err != nil {
		t.Fatal(err)
	}
	var call *core.Part
	for i := range m.Parts {
		if m.Parts[i].Type == core.PartTool {
			call = &m.Parts[i]
		}
	}
	if call == nil || call.Tool != "bash" || call.State.Status != core.ToolCompleted || call.State.Metadata["output"] != "from the shell\n" {
		t.Fatalf("shell answer = %+v", m.Parts)
	}
	if readFile(t, n.cfg.Directory, "made.txt") != "x\n" {
		t.Error("the command did not run")
	}
	st := n.status(sid)
	if st.Last == nil || st.Last.Outcome != core.RunSucceeded {
		t.Errorf("status after shell = %+v", st)
	}
	msgs := mustMessages(t, n, sid)
	if msgs[0].Info.Role != core.RoleUser || msgs[0].Parts[0].Text != "The following tool was executed by the user" || !msgs[0].Parts[0].Synthetic {
		t.Errorf("shell's user message = %+v", msgs[0].Parts)
	}
	if d, _ := n.c.Diff(ctx, sid, ""); len(d) != 1 || d[0].File != "made.txt" {
		t.Errorf("diff after shell = %+v", d)
	}
	m, _ = n.c.Shell(ctx, sid, "build", "rm -rf made.txt")
	if !strings.Contains(m.Parts[len(m.Parts)-2].State.Error+fmt.Sprint(m.Parts), "permission denied") || readFile(t, n.cfg.Directory, "made.txt") != "x\n" {
		t.Errorf("a denied shell command: %+v", m.Parts)
	}
	if _, err := n.c.Shell(ctx, "ses_nope", "build", "ls"); err == nil {
		t.Error("shell in an unknown session")
	}
	// Busy: 409; abort: the command's process is killed.
	if err := n.c.SendAsync(ctx, sid, client.Prompt{Text: "sleep:30"}); err != nil {
		t.Fatal(err)
	}
	n.waitFor(sid, func(st core.SessionStatus) bool { return st.Type == core.StatusBusy })
	var ce *client.Error
	if _, err := n.c.Shell(ctx, sid, "build", "ls"); !errors.As(err, &ce) || ce.StatusCode != 409 {
		t.Errorf("shell while busy: %v", err)
	}
	n.c.Abort(ctx, sid)
	n.waitIdle(sid)
	done := make(chan error, 1)
	go func() { _, err := n.c.Shell(ctx, sid, "build", "sleep 600"); done <- err }()
	n.waitFor(sid, func(st core.SessionStatus) bool { return st.Type == core.StatusBusy })
	n.waitToolRunning(sid)
	if ok, err := n.c.Abort(ctx, sid); !ok || err != nil {
		t.Fatalf("abort: %v %v", ok, err)
	}
	<-done
	if st := n.waitIdle(sid); st.Last.Reason != core.ReasonAborted {
		t.Errorf("aborted shell: %+v", st.Last)
	}
}

// TestNoSnapshotsWithoutChanges: turns that only talk or read (list,
// read, grep …) take no snapshot at all; snapshots cost git processes on
// every step, which the busiest sessions would pay for nothing.
func TestNoSnapshotsWithoutChanges(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	dir := n.cfg.Directory
	os.WriteFile(filepath.Join(dir, "f.txt"), []byte("v1\n"), 0o644)
	sid := n.session()
	n.send(sid, "reply:just talking")
	n.send(sid, `tool:list:{}`+"\n"+`tool:read:{"filePath":"f.txt"}`+"\nreply:read it")
	for _, m := range mustMessages(t, n, sid) {
		for _, p := range m.Parts {
			if p.Snapshot != "" || p.Type == core.PartPatch {
				t.Errorf("a %s part with snapshot %q in a turn that changed nothing", p.Type, p.Snapshot)
			}
		}
	}
	// The stores live beside the database, never in the workspace.
	stores := n.cfg.DBPath + ".snapshot"
	if _, err := os.Stat(stores); !os.IsNotExist(err) {
		t.Errorf("the snapshot store was created: %v", err)
	}
	// A turn that may change files does take them.
	n.send(sid, bash("echo v2 > f.txt"))
	if entries, err := os.ReadDir(stores); err != nil || len(entries) != 1 {
		t.Errorf("no snapshot store after a bash turn: %v %v", entries, err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".agentd")); !os.IsNotExist(err) {
		t.Errorf("agentd wrote into the workspace: %v", err)
	}
}

// TestDiffFollowsTheRevertPoint: after an undo, the session's diff and its
// summary (what opencode's "Modified Files" shows) no longer count what
// was undone, and a session.diff event says so; after the redo they count
// it again.
func TestDiffFollowsTheRevertPoint(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	ctx := t.Context()
	os.WriteFile(filepath.Join(n.cfg.Directory, "f.txt"), []byte("v1\n"), 0o644)
	sid := n.session()
	n.send(sid, bash("echo v2 > f.txt"))
	n.send(sid, bash("echo new > g.txt; echo v3 > f.txt"))
	var users []string
	for _, m := range mustMessages(t, n, sid) {
		if m.Info.Role == core.RoleUser {
			users = append(users, m.Info.ID)
		}
	}
	files := func() string {
		t.Helper()
		d, err := n.c.Diff(ctx, sid, "")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, f := range d {
			out = append(out, f.File+":"+f.Status)
		}
		// A run's summary is written just after its end; a revert's
		// before the revert answers.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			s, _ := n.c.Session(ctx, sid)
			if s.Summary != nil && s.Summary.Files == len(d) {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("summary %+v for %d files", s.Summary, len(d))
				break
			}
		}
		return strings.Join(out, ",")
	}
	lastDiff := func() string {
		var out []string
		for _, ev := range n.allEvents() {
			if ev.Type != core.EventSessionDiff {
				continue
			}
			var p struct {
				Diff []struct{ File string }
			}
			json.Unmarshal(ev.Properties, &p)
			out = out[:0]
			for _, f := range p.Diff {
				out = append(out, f.File)
			}
		}
		return strings.Join(out, ",")
	}
	if got := files(); got != "f.txt:modified,g.txt:added" {
		t.Fatalf("before the undo: %s", got)
	}
	if _, err := n.c.Revert(ctx, sid, users[1], ""); err != nil {
		t.Fatal(err)
	}
	if got := files(); got != "f.txt:modified" {
		t.Errorf("after undoing the second turn: %s", got)
	}
	if got := lastDiff(); got != "f.txt" {
		t.Errorf("session.diff after the undo: %s", got)
	}
	if _, err := n.c.Revert(ctx, sid, users[0], ""); err != nil {
		t.Fatal(err)
	}
	if got := files(); got != "" {
		t.Errorf("after undoing both turns: %s", got)
	}
	if _, err := n.c.Unrevert(ctx, sid); err != nil {
		t.Fatal(err)
	}
	if got := files(); got != "f.txt:modified,g.txt:added" {
		t.Errorf("after the redo: %s", got)
	}
	if got := lastDiff(); got != "f.txt,g.txt" {
		t.Errorf("session.diff after the redo: %s", got)
	}
}
