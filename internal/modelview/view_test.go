package modelview

import (
	"testing"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/llm"
)

// TestConvertNamesTheRecord: each turn of the model's view names the
// record's message it came from (a copy) and each block its part, so that
// plugins can match the view with the session's messages; a call's result
// names the call's part; ignored text is left out, and a message of only
// ignored text is no turn.
func TestConvertNamesTheRecord(t *testing.T) {
	t.Parallel()
	user := core.Message{ID: "msg_u", Role: core.RoleUser, Created: 1, Agent: "build"}
	notice := core.Message{ID: "msg_n", Role: core.RoleUser, Created: 2}
	asst := core.Message{ID: "msg_a", Role: core.RoleAssistant, Created: 3}
	msgs := []core.MessageWithParts{
		{Info: user, Parts: []core.Part{{ID: "prt_t", Type: core.PartText, Text: "hi"},
			{ID: "prt_i", Type: core.PartText, Text: "a plugin's notice", Ignored: true}}},
		{Info: notice, Parts: []core.Part{{ID: "prt_n", Type: core.PartText, Text: "notice", Ignored: true}}},
		{Info: asst, Parts: []core.Part{{ID: "prt_c", Type: core.PartTool, CallID: "c1", Tool: "echo",
			State: core.ToolState{Status: core.ToolCompleted, Output: "out"}}}},
	}
	out, _ := Convert("run", msgs, nil)
	if len(out) != 3 {
		t.Fatalf("%d turns: %+v", len(out), out)
	}
	if out[0].From == nil || out[0].From.ID != "msg_u" || out[0].From.Agent != "build" || len(out[0].Content) != 1 ||
		out[0].Content[0].PartID != "prt_t" {
		t.Errorf("the user's turn: %+v", out[0])
	}
	if out[0].From == &msgs[0].Info {
		t.Error("the view holds the transcript's message, not a copy")
	}
	if out[1].Role != llm.RoleAssistant || out[1].From.ID != "msg_a" || out[1].Content[0].PartID != "prt_c" {
		t.Errorf("the call: %+v", out[1])
	}
	if out[2].From.ID != "msg_a" || out[2].Content[0].PartID != "prt_c" || out[2].Content[0].Text != "out" {
		t.Errorf("its result: %+v", out[2])
	}
}

// TestComposeNamesTheCompaction: the two turns that stand for a
// compaction name the record's request and summary.
func TestComposeNamesTheCompaction(t *testing.T) {
	t.Parallel()
	msgs := []core.MessageWithParts{
		{Info: core.Message{ID: "msg_old", Role: core.RoleUser, Seq: 1}, Parts: []core.Part{{ID: "prt_o", Type: core.PartText, Text: "old"}}},
		{Info: core.Message{ID: "msg_req", Role: core.RoleUser, Seq: 2, Agent: CompactionAgent},
			Parts: []core.Part{{ID: "prt_r", Type: core.PartCompaction}}},
		{Info: core.Message{ID: "msg_sum", Role: core.RoleAssistant, Seq: 3, ParentID: "msg_req", Summary: true, Completed: 9},
			Parts: []core.Part{{ID: "prt_s", Type: core.PartText, Text: "the summary"}}},
	}
	out, _ := Compose("run", msgs, nil)
	if len(out) != 2 || out[0].From == nil || out[0].From.ID != "msg_req" || out[1].From == nil || out[1].From.ID != "msg_sum" ||
		out[1].Content[0].Text != "the summary" {
		t.Fatalf("the compaction's turns: %+v", out)
	}
}
