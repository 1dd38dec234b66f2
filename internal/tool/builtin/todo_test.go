package builtin

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/tool"
)

func TestTodoWriteValidates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, input, wantErr string }{
		{"missing list", `{}`, "todos is required"},
		{"not a list", `{"todos":"x"}`, "invalid input"},
		{"no content", `{"todos":[{"status":"pending","priority":"low"}]}`, "content is required"},
		{"bad status", `{"todos":[{"content":"x","status":"doing","priority":"low"}]}`, `status "doing"`},
		{"bad priority", `{"todos":[{"content":"x","status":"pending","priority":"urgent"}]}`, `priority "urgent"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := TodoWrite{}.Run(t.Context(), tool.Call{Input: json.RawMessage(tc.input)})
			if err != nil || !res.IsError || !strings.Contains(res.Output, tc.wantErr) || res.Todos != nil {
				t.Errorf("result %+v, %v; want an error result saying %q and no list", res, err, tc.wantErr)
			}
		})
	}
	res, err := TodoWrite{}.Run(t.Context(), tool.Call{Input: json.RawMessage(`{"todos":[]}`)})
	if err != nil || res.IsError || res.Todos == nil || len(*res.Todos) != 0 {
		t.Errorf("an empty list clears the todos: %+v, %v", res, err)
	}
	res, _ = TodoWrite{}.Run(t.Context(), tool.Call{Input: json.RawMessage(
		`{"todos":[{"content":"a","status":"completed","priority":"low"},{"content":"b","status":"pending","priority":"high"}]}`)})
	if res.Title != "1 todos" || (*res.Todos)[1].Content != "b" || (*res.Todos)[1].Status != core.TodoPending {
		t.Errorf("result %+v", res)
	}
}
