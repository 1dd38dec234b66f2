package app_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/core"
)

// taskCall is a scripted task call whose child runs childScript.
func taskCall(childScript string) string {
	b, _ := jsonString(childScript)
	return `tool:task:{"description":"look around","prompt":` + b + `,"subagent_type":"general"}`
}

func jsonString(s string) (string, error) {
	var sb strings.Builder
	sb.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			sb.WriteString(`\"`)
		case '\\':
			sb.WriteString(`\\`)
		case '\n':
			sb.WriteString(`\n`)
		default:
			sb.WriteRune(r)
		}
	}
	sb.WriteByte('"')
	return sb.String(), nil
}

// children lists a session's child sessions.
func (n *node) children(sid string) []client.Session {
	n.t.Helper()
	var out []client.Session
	all, err := n.c.Sessions(n.t.Context(), 0)
	if err != nil {
		n.t.Fatal(err)
	}
	for _, s := range all {
		if s.ParentID == sid {
			out = append(out, s)
		}
	}
	return out
}

// TestTaskTool: a task call runs a subagent in a child session, a run
// like any other, and returns its answer; the child's permissions are
// never wider than the parent's.
func TestTaskTool(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	sid := n.session()
	n.send(sid, taskCall("reply:the answer is 42")+"\nreply:parent done")
	p := n.lastToolPart(sid)
	if p == nil || p.State.Status != core.ToolCompleted || !strings.Contains(p.State.Output, "the answer is 42") ||
		!strings.Contains(p.State.Output, "task_id: ses_") {
		t.Fatalf("task call: %+v", p)
	}
	kids := n.children(sid)
	if len(kids) != 1 || p.State.Metadata["sessionId"] != kids[0].ID {
		t.Fatalf("children %+v, task metadata %v", kids, p.State.Metadata)
	}
	child := kids[0].ID
	st := n.status(child)
	if st.Type != core.StatusIdle || st.Last == nil || st.Last.Outcome != core.RunSucceeded {
		t.Errorf("child status %+v", st)
	}
	runs, _ := n.c.Runs(t.Context(), child)
	if len(runs) != 1 || runs[0].Agent != "general" {
		t.Errorf("child runs %+v", runs)
	}
	if st := n.status(sid); st.Last == nil || st.Last.Outcome != core.RunSucceeded {
		t.Errorf("parent status %+v", st)
	}

	// Not a subagent: the model is told which ones there are.
	n.send(sid, `tool:task:{"description":"x","prompt":"reply:x","subagent_type":"build"}`+"\nreply:ok")
	if p := n.lastToolPart(sid); p.State.Status != core.ToolError || !strings.Contains(p.State.Error, "the subagents are: general") {
		t.Errorf("task with a primary agent: %+v", p.State)
	}

	// The plan agent denies edits; its subagent may not edit either,
	// although general may.
	sid = n.session()
	_, err := n.c.Send(t.Context(), sid, client.Prompt{Agent: "plan",
		Text: taskCall(`tool:write:{"filePath":"x.txt","content":"x"}`+"\nreply:tried") + "\nreply:parent done"})
	if err != nil {
		t.Fatal(err)
	}
	kid := n.children(sid)[0].ID
	if p := n.lastToolPart(kid); p == nil || p.State.Status != core.ToolError || !strings.Contains(p.State.Error, "permission denied") {
		t.Errorf("the plan agent's subagent wrote a file: %+v", p)
	}
}

// TestTaskAbort: aborting the parent aborts the child; aborting the child
// ends the task call with an error the parent's model sees.
func TestTaskAbort(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	sid := n.session()
	if err := n.c.SendAsync(t.Context(), sid, client.Prompt{Text: taskCall("tool:block:{}") + "\nreply:parent done"}); err != nil {
		t.Fatal(err)
	}
	child := n.waitChildBusy(sid)
	if ok, err := n.c.Abort(t.Context(), sid); err != nil || !ok {
		t.Fatal(ok, err)
	}
	st := n.waitIdle(child)
	if st.Last == nil || st.Last.Outcome != core.RunInterrupted {
		t.Errorf("child after the parent's abort: %+v", st)
	}
	if st := n.status(sid); st.Last == nil || st.Last.Outcome != core.RunInterrupted {
		t.Errorf("parent after its abort: %+v", st)
	}

	sid = n.session()
	if err := n.c.SendAsync(t.Context(), sid, client.Prompt{Text: taskCall("tool:block:{}") + "\nreply:went on"}); err != nil {
		t.Fatal(err)
	}
	child = n.waitChildBusy(sid)
	if ok, err := n.c.Abort(t.Context(), child); err != nil || !ok {
		t.Fatal(ok, err)
	}
	st = n.waitIdle(sid)
	if st.Last == nil || st.Last.Outcome != core.RunSucceeded {
		t.Errorf("parent after its child's abort: %+v", st)
	}
	if p := n.lastToolPart(sid); p.State.Status != core.ToolError || !strings.Contains(p.State.Error, "interrupted/aborted") {
		t.Errorf("task call after its child's abort: %+v", p.State)
	}
}

// TestTaskParallel: several task calls of one step run at the same time.
func TestTaskParallel(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	sid := n.session()
	par := func(script string) string { return "par:" + strings.TrimPrefix(taskCall(script), "tool:") }
	calls := par("sleep:20\nreply:one") + "\n" + par("sleep:20\nreply:two") + "\n" + par("sleep:20\nreply:three")
	n.send(sid, calls+"\nreply:all done")
	kids := n.children(sid)
	if len(kids) != 3 {
		t.Fatalf("%d children, want 3", len(kids))
	}
	// Every child's run started before every other one ended.
	var runs []client.Run
	for _, k := range kids {
		r, err := n.c.Runs(t.Context(), k.ID)
		if err != nil || len(r) != 1 || r[0].State != core.RunSucceeded {
			t.Fatalf("child %s runs %+v, %v", k.ID, r, err)
		}
		runs = append(runs, r[0])
	}
	for _, a := range runs {
		for _, b := range runs {
			if a.Time.Started >= b.Time.Ended {
				t.Errorf("run %s started after run %s ended: the tasks ran one after the other", a.ID, b.ID)
			}
		}
	}
	msgs, _ := n.c.Messages(t.Context(), sid)
	var outputs string
	for _, m := range msgs {
		for _, p := range m.Parts {
			if p.Type == core.PartTool {
				outputs += p.State.Output
			}
		}
	}
	for _, want := range []string{" one\n</task_result>", " two\n</task_result>", " three\n</task_result>"} {
		if !strings.Contains(outputs, want) {
			t.Errorf("no task result %q in the parent's transcript: %q", want, outputs)
		}
	}
}

// TestTaskSurvivesRestart: the server stops while a child runs; after the
// restart the parent waits for the same child (no second one is started)
// and gets its answer.
func TestTaskSurvivesRestart(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	sid := n.session()
	if err := n.c.SendAsync(t.Context(), sid, client.Prompt{Text: taskCall("sleep:25\nreply:child finished") + "\nreply:parent done"}); err != nil {
		t.Fatal(err)
	}
	n.waitChildBusy(sid)
	n = n.restart()
	st := n.waitIdle(sid)
	if st.Last == nil || st.Last.Outcome != core.RunSucceeded {
		t.Fatalf("parent after the restart: %+v %+v", st, st.Last)
	}
	if kids := n.children(sid); len(kids) != 1 {
		t.Errorf("%d children after the restart, want the same one", len(kids))
	}
	if p := n.lastToolPart(sid); p.State.Status != core.ToolCompleted || !strings.Contains(p.State.Output, "child finished") {
		t.Errorf("task call after the restart: %+v", p.State)
	}
}

// waitChildBusy waits for the session's first child to be running and
// returns its id.
func (n *node) waitChildBusy(sid string) string {
	n.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if kids := n.children(sid); len(kids) > 0 {
			if st := n.status(kids[0].ID); st.Type == core.StatusBusy {
				return kids[0].ID
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	n.t.Fatal("no child session became busy")
	return ""
}
