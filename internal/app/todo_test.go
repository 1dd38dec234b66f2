package app_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/internal/core"
)

// todosOf reads GET /session/{id}/todo.
func (n *node) todosOf(sid string) (int, []core.Todo) {
	n.t.Helper()
	resp, err := http.Get(n.app.URL() + "/session/" + sid + "/todo")
	if err != nil {
		n.t.Fatal(err)
	}
	defer resp.Body.Close()
	var todos []core.Todo
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&todos); err != nil {
			n.t.Fatal(err)
		}
	}
	return resp.StatusCode, todos
}

// TestTodos: the model's todowrite replaces the session's list, which
// GET /session/{id}/todo, a todo.updated event and todoread all show and
// which survives a restart; an invalid list is an error the model sees
// and changes nothing.
func TestTodos(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	sid := n.session()
	if code, todos := n.todosOf(sid); code != http.StatusOK || todos == nil || len(todos) != 0 {
		t.Fatalf("todos of a new session = %d %#v, want 200 []", code, todos)
	}
	if code, _ := n.todosOf("ses_nope"); code != http.StatusNotFound {
		t.Errorf("todos of an unknown session = %d, want 404", code)
	}
	n.send(sid, `tool:todowrite:{"todos":[{"id":"a","content":"read the code","status":"completed","priority":"high"},`+
		`{"content":"fix the bug","status":"in_progress","priority":"medium"}]}`+"\nreply:planned")
	want := []core.Todo{{Content: "read the code", Status: "completed", Priority: "high"},
		{Content: "fix the bug", Status: "in_progress", Priority: "medium"}}
	if _, got := n.todosOf(sid); !cmp.Equal(want, got) {
		t.Errorf("todos after todowrite (-want +got):\n%s", cmp.Diff(want, got))
	}
	var updates int
	for _, ev := range n.allEvents() {
		if ev.Type != core.EventTodoUpdated {
			continue
		}
		updates++
		var p struct {
			SessionID string      `json:"sessionID"`
			Todos     []core.Todo `json:"todos"`
		}
		if err := json.Unmarshal(ev.Properties, &p); err != nil || p.SessionID != sid || !cmp.Equal(want, p.Todos) {
			t.Errorf("todo.updated = %s (%v)", ev.Properties, err)
		}
	}
	if updates != 1 {
		t.Errorf("%d todo.updated events, want 1", updates)
	}

	// An invalid list: the model sees why, the stored list stays.
	n.send(sid, `tool:todowrite:{"todos":[{"content":"x","status":"done","priority":"high"}]}`+"\nreply:retry")
	bad := n.lastToolPart(sid)
	if bad == nil || bad.State.Status != core.ToolError || !strings.Contains(bad.State.Error, `status "done"`) {
		t.Errorf("invalid todowrite: %+v", bad)
	}
	if _, got := n.todosOf(sid); !cmp.Equal(want, got) {
		t.Errorf("an invalid todowrite changed the list: %v", got)
	}

	// todoread after a restart.
	n = n.restart()
	n.send(sid, "tool:todoread:{}\nreply:read")
	read := n.lastToolPart(sid)
	if read == nil || read.State.Status != core.ToolCompleted || !strings.Contains(read.State.Output, "fix the bug") || read.State.Title != "1 todos" {
		t.Errorf("todoread after a restart: %+v", read)
	}
}

// lastToolPart is the session's most recent tool call.
func (n *node) lastToolPart(sid string) *core.Part {
	n.t.Helper()
	msgs, err := n.c.Messages(n.t.Context(), sid)
	if err != nil {
		n.t.Fatal(err)
	}
	var last *core.Part
	for i := range msgs {
		for j := range msgs[i].Parts {
			if msgs[i].Parts[j].Type == core.PartTool {
				last = &msgs[i].Parts[j]
			}
		}
	}
	return last
}
