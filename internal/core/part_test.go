package core

import (
	"bytes"
	"encoding/json"
	"testing"
)

// StoredInput is what a read gives back of a call's input, whatever the
// model sent and whatever the call's status: a runner that keeps its calls
// instead of reading them back sends the model the same bytes.
func FuzzStoredInput(f *testing.F) {
	for _, s := range []string{`{"filePath":"a.go"}`, ` { "cmd" : "a<b && c>d" } `, `[1,2]`, `"text"`, ``, `{`, `null`, "{\"k\":\"\xff\"}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, input string) {
		for _, status := range []string{ToolPending, ToolRunning, ToolCompleted, ToolError} {
			b, err := json.Marshal(Part{ID: "prt_1", Type: PartTool, State: ToolState{Status: status, Input: json.RawMessage(input)}})
			if err != nil {
				t.Fatalf("encode %q: %v", input, err)
			}
			var back Part
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatalf("decode %s: %v", b, err)
			}
			if got := StoredInput(json.RawMessage(input)); !bytes.Equal(got, back.State.Input) {
				t.Fatalf("%s input %q: StoredInput %s, read back %s", status, input, got, back.State.Input)
			}
		}
	})
}
