package plugin

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/modelview"
)

// TestOpencodeHistoryIDs: the history a messages transform gets carries
// the record's message ids and fields (time, model) and part ids, a turn
// the server made up an id that says so; a message the plugin changed
// comes back with the parts it left alone exactly as the engine composed
// them (found by id), and its changed parts converted.
func TestOpencodeHistoryIDs(t *testing.T) {
	t.Parallel()
	user := &core.Message{ID: "msg_u", SessionID: "ses", Role: core.RoleUser, Created: 7, Agent: "build",
		Model: core.ModelRef{ProviderID: "p", ModelID: "m"}}
	asst := &core.Message{ID: "msg_a", SessionID: "ses", Role: core.RoleAssistant, Created: 8, ProviderID: "p", ModelID: "m"}
	input := json.RawMessage(`{ "text" : "x" }`) // as the model wrote it, spaces and all
	msgs := []llm.Message{
		{Role: llm.RoleUser, From: user, Content: []llm.Content{{Type: llm.ContentText, Text: "hi", PartID: "prt_t"}}},
		{Role: llm.RoleAssistant, From: asst, Content: []llm.Content{{Type: llm.ContentText, Text: "calling", PartID: "prt_x"},
			{Type: llm.ContentToolCall, CallID: "c1", Name: "echo", Input: input, PartID: "prt_c"}}},
		{Role: llm.RoleUser, From: asst, Content: []llm.Content{{Type: llm.ContentToolResult, CallID: "c1", Name: "echo", Text: "out", PartID: "prt_c"}}},
		text(llm.RoleUser, "made up"),
	}
	h := toOpencode("ses", msgs)
	if len(h.msgs) != 3 {
		t.Fatalf("%d messages", len(h.msgs))
	}
	var infos []map[string]any
	for _, m := range h.msgs {
		var info map[string]any
		if err := json.Unmarshal(m.Info, &info); err != nil {
			t.Fatal(err)
		}
		infos = append(infos, info)
	}
	if infos[0]["id"] != "msg_u" || infos[0]["time"].(map[string]any)["created"] != 7.0 ||
		infos[0]["model"].(map[string]any)["modelID"] != "m" || h.msgs[0].Parts[0].ID != "prt_t" {
		t.Errorf("the user's message: %s %+v", h.msgs[0].Info, h.msgs[0].Parts)
	}
	parts := h.msgs[1].Parts
	if infos[1]["id"] != "msg_a" || infos[1]["modelID"] != "m" || len(parts) != 3 || parts[0].Type != "step-start" ||
		parts[2].ID != "prt_c" || parts[2].MessageID != "msg_a" || parts[2].State.Output != "out" {
		t.Errorf("the assistant's message: %s %+v", h.msgs[1].Info, parts)
	}
	if id, _ := infos[2]["id"].(string); !strings.HasPrefix(id, "msg_agentd_synthetic_") || infos[2]["agent"] != "build" {
		t.Errorf("a made-up turn: %s", h.msgs[2].Info)
	}

	// The plugin changes the text and leaves the call alone.
	var changed ocMessage
	b, _ := json.Marshal(h.msgs[1])
	if err := json.Unmarshal(b, &changed); err != nil {
		t.Fatal(err)
	}
	changed.Parts[1].Text = "calling (trimmed)"
	got := h.fromOpencode(changed)
	want := []llm.Message{
		{Role: llm.RoleAssistant, Content: []llm.Content{{Type: llm.ContentText, Text: "calling (trimmed)", PartID: "prt_x"}, msgs[1].Content[1]}},
		{Role: llm.RoleUser, Content: []llm.Content{msgs[2].Content[0]}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("back:\n%+v\nwant\n%+v", got, want)
	}
}

// TestOpencodeHistoryFidelity: the parts a messages transform gets carry
// what opencode's do, from the record: a finished tool part's state is
// the record's state as opencode's API renders it (title, metadata, time
// {start, end}), a text part its synthetic flag and time; and a message
// the plugin hands back as it got it (its JSON through the host) is still
// found unchanged, metadata and all.
func TestOpencodeHistoryFidelity(t *testing.T) {
	t.Parallel()
	user := core.MessageWithParts{Info: core.Message{ID: "msg_u", SessionID: "ses", Role: core.RoleUser, Created: 7, RunID: "run"},
		Parts: []core.Part{
			{ID: "prt_1", SessionID: "ses", MessageID: "msg_u", Type: core.PartText, Text: "read a.txt"},
			{ID: "prt_2", SessionID: "ses", MessageID: "msg_u", Type: core.PartText, Text: "<file>a</file>", Synthetic: true,
				Time: core.PartTime{Start: 70}},
		}}
	tool := core.Part{ID: "prt_4", SessionID: "ses", MessageID: "msg_a", Type: core.PartTool, CallID: "c1", Tool: "read",
		State: core.ToolState{Status: core.ToolCompleted, Input: json.RawMessage(`{"filePath":"a.txt"}`), Output: "a",
			Title: "a.txt", Metadata: map[string]any{"preview": "a", "lines": 1.0}, Time: core.PartTime{Start: 80, End: 90}}}
	failed := core.Part{ID: "prt_5", SessionID: "ses", MessageID: "msg_a", Type: core.PartTool, CallID: "c2", Tool: "bash",
		State: core.ToolState{Status: core.ToolError, Input: json.RawMessage(`{"command":"x"}`), Error: "no such command",
			Metadata: map[string]any{"exit": 127.0}, Time: core.PartTime{Start: 91, End: 95}}}
	asst := core.MessageWithParts{Info: core.Message{ID: "msg_a", SessionID: "ses", Role: core.RoleAssistant, Created: 8},
		Parts: []core.Part{
			{ID: "prt_3", SessionID: "ses", MessageID: "msg_a", Type: core.PartText, Text: "reading", Time: core.PartTime{Start: 75, End: 79}},
			tool, failed,
		}}
	msgs, _ := modelview.Convert("run", []core.MessageWithParts{user, asst}, nil)
	h := toOpencode("ses", msgs)
	if len(h.msgs) != 2 || len(h.msgs[0].Parts) != 2 || len(h.msgs[1].Parts) != 4 {
		t.Fatalf("the history: %+v", h.msgs)
	}
	synth := h.msgs[0].Parts[1]
	if !synth.Synthetic || synth.Time == nil || synth.Time.Start != 70 || h.msgs[0].Parts[0].Synthetic {
		t.Errorf("the user's parts: %+v %+v", h.msgs[0].Parts[0], synth)
	}
	if txt := h.msgs[1].Parts[1]; txt.Time == nil || *txt.Time != (core.PartTime{Start: 75, End: 79}) {
		t.Errorf("the assistant's text: %+v", txt)
	}
	for i, rec := range []core.Part{tool, failed} {
		got, _ := json.Marshal(h.msgs[1].Parts[2+i].State)
		want, _ := json.Marshal(rec.State)
		if string(got) != string(want) {
			t.Errorf("tool part %s's state:\n%s\nopencode's (the record's):\n%s", rec.ID, got, want)
		}
	}

	for i := range h.msgs {
		var back ocMessage
		b, _ := json.Marshal(h.msgs[i])
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		for _, p := range back.Parts[min(i, 1):] { // the step-start part is made up
			if h.unchanged(p) == nil {
				t.Errorf("part %s handed back as it was sent reads as changed", p.ID)
			}
		}
	}
}
