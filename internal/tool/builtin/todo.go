package builtin

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/tool"
)

// TodoWrite replaces the session's todo list. It writes nothing itself: the
// list travels in its result and is stored with the call's completion.
type TodoWrite struct{}

// Name implements tool.Tool.
func (TodoWrite) Name() string { return "todowrite" }

// ReadOnly says todowrite changes no file (the list is the session's).
func (TodoWrite) ReadOnly() bool { return true }

// Description implements tool.Tool.
func (TodoWrite) Description() string { return describe("todowrite") }

// Schema implements tool.Tool.
func (TodoWrite) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"todos":{"type":"array","items":{"type":"object","properties":{` +
		`"content":{"type":"string"},` +
		`"status":{"type":"string","enum":["pending","in_progress","completed","cancelled"]},` +
		`"priority":{"type":"string","enum":["high","medium","low"]}},"required":["content","status","priority"]}}},"required":["todos"]}`)
}

// maxTodos bounds a list: the whole list is stored and sent in an event at
// every write.
const maxTodos = 200

// Run implements tool.Tool.
func (TodoWrite) Run(_ context.Context, call tool.Call) (tool.Result, error) {
	// Fields beyond opencode's shape (an id some models add) are dropped.
	var in struct {
		Todos *[]core.Todo `json:"todos"`
	}
	if r := decode(call.Input, &in); r != nil {
		return *r, nil
	}
	if in.Todos == nil {
		return tool.Errorf("todos is required: the whole list, each item with content, status and priority"), nil
	}
	todos := *in.Todos
	if len(todos) > maxTodos {
		return tool.Errorf(fmt.Sprintf("%d todos: at most %d", len(todos), maxTodos)), nil
	}
	for i := range todos {
		t := &todos[i]
		if t.Content == "" {
			return tool.Errorf(fmt.Sprintf("todo %d: content is required", i+1)), nil
		}
		switch t.Status {
		case core.TodoPending, core.TodoInProgress, core.TodoCompleted, core.TodoCancelled:
		default:
			return tool.Errorf(fmt.Sprintf("todo %d: status %q is not one of pending, in_progress, completed, cancelled", i+1, t.Status)), nil
		}
		switch t.Priority {
		case "high", "medium", "low":
		default:
			return tool.Errorf(fmt.Sprintf("todo %d: priority %q is not one of high, medium, low", i+1, t.Priority)), nil
		}
	}
	out, _ := json.MarshalIndent(todos, "", "  ")
	return tool.Result{Output: string(out), Title: fmt.Sprintf("%d todos", openTodos(todos)),
		Metadata: map[string]any{"todos": todos}, Todos: &todos}, nil
}

// openTodos counts the items not yet done, as opencode titles the call.
func openTodos(todos []core.Todo) int {
	n := 0
	for _, t := range todos {
		if t.Status != core.TodoCompleted && t.Status != core.TodoCancelled {
			n++
		}
	}
	return n
}

// TodoRead returns the session's todo list.
type TodoRead struct{}

// Name implements tool.Tool.
func (TodoRead) Name() string { return "todoread" }

// ReadOnly says todoread changes no file.
func (TodoRead) ReadOnly() bool { return true }

// Description implements tool.Tool.
func (TodoRead) Description() string { return describe("todoread") }

// Schema implements tool.Tool.
func (TodoRead) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{}}`)
}

// Run implements tool.Tool.
func (TodoRead) Run(ctx context.Context, call tool.Call) (tool.Result, error) {
	if call.Todos == nil {
		return tool.Errorf("this server keeps no todo list"), nil
	}
	todos, err := call.Todos(ctx)
	if err != nil {
		return tool.Result{}, fmt.Errorf("read todos: %w", err)
	}
	out, _ := json.MarshalIndent(todos, "", "  ")
	return tool.Result{Output: string(out), Title: fmt.Sprintf("%d todos", openTodos(todos)), Metadata: map[string]any{"todos": todos}}, nil
}
