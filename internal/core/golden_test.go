package core

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden wire shapes")

// TestWireShapes pins the JSON of the domain types byte for byte against
// testdata/wire.golden.json: what clients parse must not change when the
// Go types do (typed states, refactors). Regenerate with -update only for
// a wire change made on purpose.
func TestWireShapes(t *testing.T) {
	ended := Run{ID: "run_1", SessionID: "ses_1", State: RunFailed, Reason: ReasonRetriesExhausted,
		Error: NewError(ErrNameAPI, "429 Too Many Requests"), UserMessageID: "msg_1",
		Model: ModelRef{ProviderID: "openai", ModelID: "gpt-4.1"}, Agent: "build", Steps: 2, Resumes: 1,
		Time: RunTime{Created: 1, Started: 2, Ended: 3}, Snapshot: "abc", SnapshotEnd: "def"}
	retrying := Run{ID: "run_2", SessionID: "ses_1", State: RunRetrying, UserMessageID: "msg_2", Phase: PhaseRecovering,
		Attempt: 2, RetryMessage: "rate limited", NextRetry: 99, Time: RunTime{Created: 5}}
	parts := []Part{
		{ID: "prt_1", SessionID: "ses_1", MessageID: "msg_1", Type: PartText, Text: "hello", Time: PartTime{Start: 1, End: 2}},
		{ID: "prt_2", SessionID: "ses_1", MessageID: "msg_1", Type: PartText, Text: "user text"},
		{ID: "prt_3", SessionID: "ses_1", MessageID: "msg_1", Type: PartReasoning, Text: "thinking", Time: PartTime{Start: 1},
			Metadata: map[string]any{"anthropic": map[string]any{"signature": "s"}}},
		{ID: "prt_4", SessionID: "ses_1", MessageID: "msg_1", Type: PartTool, CallID: "call_1", Tool: "bash",
			State: ToolState{Status: ToolCompleted, Input: json.RawMessage(`{"command":"ls"}`), Output: "a\n", Title: "ls",
				Time: PartTime{Start: 1, End: 2}}},
		{ID: "prt_5", SessionID: "ses_1", MessageID: "msg_1", Type: PartTool, CallID: "call_2", Tool: "read",
			State: ToolState{Status: ToolError, Input: json.RawMessage(`"not an object"`), Error: "bad input", Time: PartTime{Start: 1, End: 2}}},
		{ID: "prt_6", SessionID: "ses_1", MessageID: "msg_1", Type: PartTool, CallID: "call_3", Tool: "edit",
			State: ToolState{Status: ToolRunning, Input: json.RawMessage(`{}`), Time: PartTime{Start: 4}}},
		{ID: "prt_7", SessionID: "ses_1", MessageID: "msg_1", Type: PartTool, CallID: "call_4", Tool: "glob",
			State: ToolState{Status: ToolPending, Input: json.RawMessage(`{}`), Raw: "{"}},
		{ID: "prt_8", SessionID: "ses_1", MessageID: "msg_1", Type: PartStepStart, Snapshot: "abc"},
		{ID: "prt_9", SessionID: "ses_1", MessageID: "msg_1", Type: PartStepFinish, Reason: "tool-calls", Cost: 0.5,
			Tokens: Tokens{Input: 10, Output: 5, Cache: CacheTokens{Read: 1}}},
		{ID: "prt_10", SessionID: "ses_1", MessageID: "msg_1", Type: PartPatch, Hash: "abc", Files: []string{"a.go"}},
		{ID: "prt_11", SessionID: "ses_1", MessageID: "msg_1", Type: PartFile, Mime: "text/plain", Filename: "a.txt", URL: "data:,x"},
		{ID: "prt_12", SessionID: "ses_1", MessageID: "msg_1", Type: PartCompaction, Auto: true, Overflow: true},
		{ID: "prt_13", SessionID: "ses_1", MessageID: "msg_1", Type: PartIdle, RunID: "run_1", Outcome: RunFailed,
			Reason: string(ReasonMaxSteps), Error: UnknownError(RefMaxSteps, "stopped"), Time: PartTime{Start: 7}},
	}
	messages := []Message{
		{ID: "msg_1", SessionID: "ses_1", Role: RoleUser, Created: 1, Agent: "build", Model: ModelRef{ProviderID: "p", ModelID: "m"}},
		{ID: "msg_2", SessionID: "ses_1", Role: RoleAssistant, Created: 2, Completed: 3, ParentID: "msg_1", ModelID: "m",
			ProviderID: "p", Mode: "build", Agent: "build", CWD: "/w", Root: "/w", Cost: 1, Finish: "stop",
			Error: AbortedError("aborted")},
	}
	statuses := []SessionStatus{
		StatusOf(nil, nil), StatusOf(nil, &ended), StatusOf(&retrying, nil),
		StatusOf(&Run{ID: "run_3", State: RunRunning, Phase: PhaseWaitingPermission, Time: RunTime{Created: 8}}, nil),
	}
	var opencode []OpencodeStatus
	for _, s := range statuses {
		opencode = append(opencode, s.Opencode())
	}
	got, err := json.MarshalIndent(map[string]any{"runs": []Run{ended, retrying}, "parts": parts, "messages": messages,
		"statuses": statuses, "opencodeStatuses": opencode}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "wire.golden.json")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != string(got) {
		t.Errorf("the wire shapes changed; if on purpose, go test -run TestWireShapes -update\ngot:\n%s", got)
	}
}
