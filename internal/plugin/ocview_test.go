package plugin

import (
	"encoding/json"
	"fmt"
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
	// Each part is the record's as opencode's API renders it.
	sent := append(append([]ocPart{}, h.msgs[0].Parts...), h.msgs[1].Parts[1:]...)
	for i, rec := range append(append([]core.Part{}, user.Parts...), asst.Parts...) {
		var got, want any
		b, _ := json.Marshal(sent[i])
		_ = json.Unmarshal(b, &got)
		r, _ := json.Marshal(rec)
		_ = json.Unmarshal(r, &want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("part %s:\n%s\nopencode's (the record's):\n%s", rec.ID, b, r)
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

// BenchmarkOpencodeHistory is the server's side of a step's transform
// before the host is called: 200 messages (100 turns of a prompt and an
// answer with a read call whose metadata holds a 1 KiB preview, as
// opencode's read tool's does) turned into opencode's shape and
// fingerprinted, with the record's part fields ("record") and without
// them ("bare", the view before they were added).
func BenchmarkOpencodeHistory(b *testing.B) {
	var recs []core.MessageWithParts
	for i := range 100 {
		u := fmt.Sprintf("msg_u%03d", i)
		a := fmt.Sprintf("msg_a%03d", i)
		recs = append(recs, core.MessageWithParts{Info: core.Message{ID: u, SessionID: "ses", Role: core.RoleUser, Created: int64(i)},
			Parts: []core.Part{{ID: "prt_u" + u, SessionID: "ses", MessageID: u, Type: core.PartText, Text: strings.Repeat("u", 2<<10),
				Time: core.PartTime{Start: 1, End: 2}}}},
			core.MessageWithParts{Info: core.Message{ID: a, SessionID: "ses", Role: core.RoleAssistant, Created: int64(i)},
				Parts: []core.Part{
					{ID: "prt_t" + a, SessionID: "ses", MessageID: a, Type: core.PartText, Text: "reading", Time: core.PartTime{Start: 3, End: 4}},
					{ID: "prt_c" + a, SessionID: "ses", MessageID: a, Type: core.PartTool, CallID: "c" + a, Tool: "read",
						State: core.ToolState{Status: core.ToolCompleted, Input: json.RawMessage(`{"filePath":"a.go"}`), Output: strings.Repeat("o", 2<<10),
							Title: "a.go", Metadata: map[string]any{"preview": strings.Repeat("p", 1<<10), "truncated": false},
							Time: core.PartTime{Start: 5, End: 6}}},
				}})
	}
	record, _ := modelview.Convert("run", recs, nil)
	bare := make([]llm.Message, len(record))
	for i, m := range record {
		bare[i] = m
		bare[i].Content = append([]llm.Content(nil), m.Content...)
		for j := range bare[i].Content {
			bare[i].Content[j].Part = nil
		}
	}
	for _, v := range []struct {
		name string
		msgs []llm.Message
	}{{"bare", bare}, {"record", record}} {
		b.Run(v.name, func(b *testing.B) {
			for b.Loop() {
				h := toOpencode("ses", v.msgs)
				for i := range h.msgs {
					if _, err := json.Marshal(h.msgs[i]); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
