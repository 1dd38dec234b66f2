package engine_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/engine"
	"github.com/agentd/agentd/internal/store"
)

// TestRejectEndsTheTurn: as in opencode, a permission the user rejects
// without a message ends the turn there: the call fails with the
// rejection, the model is not called again, and the run ends
// interrupted/rejected with no error (the user said no; nothing failed).
// With a message the model gets it as feedback and goes on (opencode's
// CorrectedError).
func TestRejectEndsTheTurn(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, message string
		state         core.RunState
		reason        core.EndReason
		toolError     string
		answered      bool
	}{
		{"without a message", "", core.RunInterrupted, core.ReasonRejected, "The user rejected permission to use this specific tool call.", false},
		{"with a message", "use ls instead", core.RunSucceeded, "",
			"The user rejected permission to use this specific tool call with the following feedback: use ls instead", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			n := newNode(t, nil)
			sid := n.session()
			adm, err := n.e.Prompt(t.Context(), sid, engine.PromptInput{Parts: []engine.InputPart{{Type: core.PartText,
				Text: `tool:bash:{"command":"rm -rf nothing"}` + "\nreply:after the rejection"}}})
			if err != nil {
				t.Fatal(err)
			}
			var req core.PermissionRequest
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				pending, _ := n.st.PendingPermissions(t.Context(), sid)
				if len(pending) == 1 {
					req = pending[0]
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("never asked")
				}
			}
			if err := n.e.Reply(t.Context(), req.ID, core.ReplyReject, c.message); err != nil {
				t.Fatal(err)
			}
			run, err := n.e.WaitRun(t.Context(), adm.RunID)
			if err != nil || run.State != c.state || run.Reason != c.reason || run.Error != nil {
				t.Fatalf("run ended %s/%s %v (%v), want %s/%s", run.State, run.Reason, run.Error, err, c.state, c.reason)
			}
			msgs, err := n.st.Messages(t.Context(), sid, store.MessageQuery{})
			if err != nil {
				t.Fatal(err)
			}
			var calls []core.Part
			answered := false
			for _, m := range msgs {
				for _, p := range m.Parts {
					if p.Type == core.PartTool {
						calls = append(calls, p)
					}
					answered = answered || m.Info.Role == core.RoleAssistant && p.Type == core.PartText && strings.Contains(p.Text, "after the rejection")
				}
				if m.Info.Role == core.RoleAssistant && m.Info.Error != nil {
					t.Errorf("the answer carries an error: %+v", m.Info.Error)
				}
			}
			if len(calls) != 1 || calls[0].State.Status != core.ToolError || calls[0].State.Error != c.toolError {
				t.Errorf("the call: %+v", calls)
			}
			if answered != c.answered {
				t.Errorf("the model answered after the rejection: %v, want %v", answered, c.answered)
			}
			st, _ := n.st.SessionStatus(t.Context(), sid)
			if st.Type != core.StatusIdle || st.Last == nil || st.Last.Outcome != c.state || st.Last.Reason != c.reason {
				t.Errorf("status: %+v", st)
			}
		})
	}
}
