package apiv2_test

import (
	"net/http"
	"testing"
	"time"
)

// TestClientFlow is an opencode 2 client's session: create, prompt,
// watch the session's events, wait, read the transcript with the run's
// idle entry and the history with its execution events, interrupt,
// revert.
func TestClientFlow(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	sid := n.session()

	done := make(chan []event, 1)
	go func() {
		done <- n.sse("/api/session/"+sid+"/event?after=0", nil, func(evs []event) bool {
			return count(evs, "session.execution.succeeded") == 1
		})
	}()
	mid := n.prompt(sid, "reasoning:let me see\nreply:hello there")
	n.wait(sid)
	streamed := <-done
	for _, typ := range []string{"session.next.prompted", "session.execution.started", "session.next.step.started",
		"session.next.reasoning.ended", "session.next.text.ended", "session.next.step.ended", "session.execution.succeeded"} {
		if count(streamed, typ) != 1 {
			t.Errorf("%s: %d on the session stream, want 1", typ, count(streamed, typ))
		}
	}

	var info struct {
		Data struct {
			ID      string `json:"id"`
			Outcome string `json:"outcome"`
			Time    struct {
				Idle int64 `json:"idle"`
			} `json:"time"`
		} `json:"data"`
	}
	n.must(200, "GET", "/api/session/"+sid, nil).decode(t, &info)
	if info.Data.Outcome != "succeeded" || info.Data.Time.Idle == 0 {
		t.Errorf("session info = %+v, want outcome succeeded and time.idle", info.Data)
	}

	list := n.entries(sid)
	if len(list) != 3 || list[0]["type"] != "user" || list[0]["id"] != mid || list[0]["text"] != "reasoning:let me see\nreply:hello there" ||
		list[1]["type"] != "assistant" || list[2]["type"] != "idle" || list[2]["outcome"] != "succeeded" {
		t.Fatalf("transcript = %v", list)
	}
	hist := n.history(sid)
	if count(hist, "session.execution.started") != 1 || count(hist, "session.execution.succeeded") != 1 {
		t.Errorf("history: %d starts and %d ends, want 1 and 1", count(hist, "session.execution.started"), count(hist, "session.execution.succeeded"))
	}

	// Interrupt a long run: it ends at once, interrupted by the user.
	n.prompt(sid, "sleep:30\nreply:late")
	waitFor(t, "the session to run", func() bool {
		var act struct {
			Data map[string]any `json:"data"`
		}
		n.must(200, "GET", "/api/session/active", nil).decode(t, &act)
		return act.Data[sid] != nil
	})
	start := time.Now()
	var intr struct {
		Interrupted bool `json:"interrupted"`
	}
	n.must(200, "POST", "/api/session/"+sid+"/interrupt", nil).decode(t, &intr)
	n.wait(sid)
	if !intr.Interrupted {
		t.Error("interrupt answered false for a running session")
	}
	t.Logf("interrupt to idle: %v", time.Since(start))
	hist = n.history(sid)
	var reason any
	for _, e := range hist {
		if e.Type == "session.execution.interrupted" {
			reason = e.Data["reason"]
		}
	}
	if count(hist, "session.execution.interrupted") != 1 || reason != "user" {
		t.Errorf("interrupted events = %d (reason %v), want 1 (user)", count(hist, "session.execution.interrupted"), reason)
	}
	n.must(200, "POST", "/api/session/"+sid+"/interrupt", nil).decode(t, &intr)
	if intr.Interrupted {
		t.Error("interrupt of an idle session answered true")
	}

	// Revert the first turn: staged, cleared, staged and committed.
	var staged struct {
		Data struct {
			MessageID string `json:"messageID"`
		} `json:"data"`
	}
	n.must(200, "POST", "/api/session/"+sid+"/revert/stage", map[string]any{"messageID": mid}).decode(t, &staged)
	if staged.Data.MessageID != mid {
		t.Errorf("staged revert = %+v", staged.Data)
	}
	n.must(http.StatusNoContent, "POST", "/api/session/"+sid+"/revert/clear", nil)
	n.must(200, "POST", "/api/session/"+sid+"/revert/stage", map[string]any{"messageID": mid})
	n.must(http.StatusNoContent, "POST", "/api/session/"+sid+"/revert/commit", nil)
	if left := n.entries(sid); len(left) != 0 {
		t.Errorf("after the commit the transcript holds %d entries, want 0", len(left))
	}
	hist = n.history(sid)
	for _, typ := range []string{"session.next.revert.staged", "session.next.revert.cleared", "session.next.revert.committed"} {
		if count(hist, typ) == 0 {
			t.Errorf("no %s in the history", typ)
		}
	}
}
