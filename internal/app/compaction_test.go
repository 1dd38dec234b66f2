package app_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/fakellm"
	"github.com/agentd/agentd/internal/llm/scripted"
)

// smallModel is a model with a 4,000-token context window, 500 of them
// kept for the answer.
const smallModel = `{"name": "Small window", "limit": {"context": 4000, "output": 500}}`

// tokensOf is a request's size in tokens as the fake model counts them.
func tokensOf(r fakellm.Recorded) int { return scripted.Size(r.Request) / 4 }

// stepRequests are the recorded step requests (titles and summaries apart).
func stepRequests(fake *fakellm.Server) []fakellm.Recorded {
	var out []fakellm.Recorded
	for _, r := range fake.Recorded() {
		if r.Request.Purpose == "" {
			out = append(out, r)
		}
	}
	return out
}

func countEvents(n *node, typ string) int {
	c := 0
	for _, ev := range n.allEvents() {
		if ev.Type == typ {
			c++
		}
	}
	return c
}

// TestCompactionPrunesToolOutputs: when tool outputs fill the window, the
// old ones stop being sent (the transcript keeps them) and every request
// stays within the model's context.
func TestCompactionPrunesToolOutputs(t *testing.T) {
	t.Parallel()
	// Only the tools the test calls are offered: their descriptions count
	// against the small window, and the test measures tool outputs.
	n, fake := modelNode(t, providerKinds[0], smallModel,
		`, "agent": {"build": {"tools": {"*": false, "read": true}}}`)
	write(t, filepath.Join(n.cfg.Directory, "f.txt"), strings.Repeat("0123456789abcdefghijklmnopqrstuvwxyz\n", 80))
	sid := n.session()
	for range 4 {
		n.send(sid, `tool:read:{"filePath":"f.txt"}`)
	}
	for _, r := range stepRequests(fake) {
		if tokensOf(r) >= 4000 {
			t.Errorf("a request of %d tokens was sent to a 4,000-token model", tokensOf(r))
		}
	}
	pruned, outputs := 0, 0
	for _, m := range mustMessages(t, n, sid) {
		for _, p := range m.Parts {
			if p.Type == core.PartTool {
				outputs++
				if p.State.Time.Compacted != 0 {
					pruned++
					if !strings.Contains(p.State.Output, "0123456789") {
						t.Error("a pruned output was lost from the transcript")
					}
				}
			}
		}
	}
	if pruned == 0 || pruned == outputs {
		t.Errorf("%d of %d tool outputs pruned; want the old ones only", pruned, outputs)
	}
	told := false
	for _, r := range stepRequests(fake) {
		told = told || strings.Contains(string(r.Body), "output pruned to save context")
	}
	if !told {
		t.Error("the model was never told that outputs were pruned")
	}
	if n.status(sid).Last.Outcome != core.RunSucceeded {
		t.Error("the run did not succeed")
	}
}

// TestCompactionSummarizes: when pruning is not enough, the model writes
// a summary; later requests send the summary and the recent tail, and stay
// within the window. Nothing of the transcript is lost.
func TestCompactionSummarizes(t *testing.T) {
	t.Parallel()
	n, fake := modelNode(t, providerKinds[0], smallModel, "")
	sid := n.session()
	long := strings.Repeat("word ", 600)
	prompts := []string{"FIRST " + long, "SECOND " + long, "THIRD " + long}
	for _, p := range prompts {
		n.send(sid, "reply:"+p)
	}
	reqs := stepRequests(fake)
	for _, r := range reqs {
		if tokensOf(r) >= 4000 {
			t.Errorf("a request of %d tokens was sent to a 4,000-token model", tokensOf(r))
		}
	}
	last := string(reqs[len(reqs)-1].Body)
	if strings.Contains(last, "FIRST") && !strings.Contains(last, "Summary of") {
		t.Error("the last request holds the first prompt and no summary")
	}
	if !strings.Contains(last, "Summary of") || !strings.Contains(last, "THIRD") {
		t.Errorf("the last request lacks the summary or the latest prompt")
	}
	msgs := mustMessages(t, n, sid)
	var compactions, summaries, users int
	for _, m := range msgs {
		if m.Info.Summary {
			summaries++
			if m.Info.Completed == 0 || !strings.HasPrefix(textOf(m), "Summary of") {
				t.Errorf("summary message: %+v %q", m.Info, textOf(m))
			}
		}
		for _, p := range m.Parts {
			if p.Type == core.PartCompaction {
				compactions++
				if !p.Auto {
					t.Error("an automatic compaction is not marked auto")
				}
			}
			if p.Type == core.PartText && m.Info.Role == core.RoleUser {
				users++
			}
		}
	}
	if compactions == 0 || summaries != compactions || users != len(prompts) {
		t.Errorf("compactions %d, summaries %d, prompts kept %d of %d", compactions, summaries, users, len(prompts))
	}
	phases := 0
	for _, ev := range n.allEvents() {
		if ev.Type == core.EventRunUpdated && strings.Contains(string(ev.Properties), `"phase":"compacting"`) {
			phases++
		}
	}
	if phases == 0 {
		t.Error("the run never showed the compacting phase")
	}
	if countEvents(n, core.EventSessionCompacted) != compactions {
		t.Errorf("session.compacted events: %d, want %d", countEvents(n, core.EventSessionCompacted), compactions)
	}
	// opencode's shapes: the compaction part and the summary flag.
	var raw []map[string]any
	if err := getJSON(n, "/session/"+sid+"/message", &raw); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(raw)
	if !strings.Contains(string(b), `"type":"compaction"`) || !strings.Contains(string(b), `"summary":true`) {
		t.Error("the transcript does not show the compaction in opencode's shapes")
	}
}

// TestSummarizeOnDemand: POST /session/{id}/summarize compacts at once;
// the next prompt starts from the summary.
func TestSummarizeOnDemand(t *testing.T) {
	t.Parallel()
	n, fake := modelNode(t, providerKinds[0], "", "")
	sid := n.session()
	n.send(sid, "reply:EARLY-ANSWER")
	n.send(sid, "reply:second")
	if err := n.c.Summarize(t.Context(), sid); err != nil {
		t.Fatal(err)
	}
	st := n.status(sid)
	if st.Last.Outcome != core.RunSucceeded {
		t.Fatalf("summarize run ended %+v", st.Last)
	}
	n.send(sid, "reply:after")
	reqs := stepRequests(fake)
	last := string(reqs[len(reqs)-1].Body)
	// Once in the summary (which quotes the prompts), no more: the
	// prompt and its answer are no longer sent.
	if strings.Count(last, "EARLY-ANSWER") != 1 || !strings.Contains(last, "Summary of") {
		t.Errorf("after summarize the request still holds the history or lacks the summary:\n%s", last)
	}
	var manual bool
	for _, m := range mustMessages(t, n, sid) {
		for _, p := range m.Parts {
			manual = manual || p.Type == core.PartCompaction && !p.Auto
		}
	}
	if !manual {
		t.Error("no compaction part with auto false")
	}
}

// TestContextOverflowCompactsAndRetries: a provider refusing a request as
// too long makes the run compact and run the step once more.
func TestContextOverflowCompactsAndRetries(t *testing.T) {
	t.Parallel()
	n, _ := modelNode(t, providerKinds[0], `{"name": "No known limit"}`, "")
	sid := n.session()
	n.send(sid, "reply:"+strings.Repeat("history ", 500))
	m := n.send(sid, "overflow:11000\nreply:fits now")
	if textOf(m) != "fits now" {
		t.Fatalf("answer after the overflow = %q", textOf(m))
	}
	var refused, overflow bool
	for _, mm := range mustMessages(t, n, sid) {
		if mm.Info.Error != nil && mm.Info.Error.Name == "ContextOverflowError" {
			refused = true
		}
		for _, p := range mm.Parts {
			overflow = overflow || p.Type == core.PartCompaction && p.Overflow
		}
	}
	if !refused || !overflow {
		t.Errorf("refused step marked %v, compaction marked overflow %v", refused, overflow)
	}
	// The compaction's request, inserted in the transaction that also
	// carries the refused step's end, comes after that step, in the
	// server's order of arrival; its summary after it.
	var order []string
	for _, mm := range mustMessages(t, n, sid) {
		switch {
		case mm.Info.Error != nil:
			order = append(order, "refused")
		case mm.Info.Role == core.RoleUser && mm.Info.Agent == "compaction":
			order = append(order, "request")
		case mm.Info.Summary:
			order = append(order, "summary")
		}
	}
	if strings.Join(order, " ") != "refused request summary" {
		t.Errorf("transcript order %v, want the refused step, the compaction request, its summary", order)
	}
	// A refusal that compaction cannot cure fails the run once, not in a
	// loop.
	n.send(sid, "overflow:10\nreply:never")
	if st := n.status(sid); st.Last.Outcome != core.RunFailed || st.Last.Error.Name != "ContextOverflowError" {
		t.Errorf("run ended %+v", st.Last)
	}
}
