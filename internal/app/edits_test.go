package app_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/core"
)

// edit makes a request of the message and part routes and returns its
// status and body.
func edit(t *testing.T, n *node, method, path string, body any) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, err := http.NewRequestWithContext(t.Context(), method, n.app.URL()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestMessageEditsKeepTheRecord: a client's delete of a message and
// change of a part reach the model's next request (the history the
// engine keeps between runs is not reused past them), while the runs,
// their outcomes and every event written before stay as they were; while
// a run is active nothing changes (409).
func TestMessageEditsKeepTheRecord(t *testing.T) {
	t.Parallel()
	n, fake := modelNode(t, providerKinds[0], "", "")
	sid := n.session()
	for _, p := range []string{"reply:ALPHA-ONE", "reply:BRAVO-TWO", "reply:CHARLIE-THREE"} {
		n.send(sid, p)
	}
	runsBefore, err := n.app.Store.Runs(t.Context(), sid, 0)
	if err != nil {
		t.Fatal(err)
	}
	eventsBefore := n.allEvents()
	msgs := mustMessages(t, n, sid)
	first, second := msgs[0], msgs[2]
	if !strings.Contains(first.Parts[0].Text, "ALPHA") || !strings.Contains(second.Parts[0].Text, "BRAVO") {
		t.Fatalf("unexpected transcript: %q %q", first.Parts[0].Text, second.Parts[0].Text)
	}

	sp := "/session/" + sid
	if code, body := edit(t, n, "DELETE", sp+"/message/"+second.Info.ID, nil); code != 200 {
		t.Fatalf("delete: %d %s", code, body)
	}
	partPath := sp + "/message/" + first.Info.ID + "/part/" + first.Parts[0].ID
	code, body := edit(t, n, "PATCH", partPath, map[string]any{"type": "text", "text": "reply:ALPHA-EDITED"})
	if code != 200 || !strings.Contains(body, "ALPHA-EDITED") {
		t.Fatalf("patch: %d %s", code, body)
	}

	n.send(sid, "reply:DELTA-FOUR")
	last := string(lastRequest(t, fake).Body)
	if strings.Contains(last, "reply:BRAVO-TWO") || strings.Contains(last, "reply:ALPHA-ONE") || !strings.Contains(last, "reply:ALPHA-EDITED") {
		t.Errorf("the model's next request does not show the edits:\n%s", last)
	}

	runsAfter, err := n.app.Store.Runs(t.Context(), sid, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(runsBefore, runsAfter[1:]); diff != "" {
		t.Errorf("the runs changed (-before +after):\n%s", diff)
	}
	eventsAfter := n.allEvents()
	if diff := cmp.Diff(eventsBefore, eventsAfter[:len(eventsBefore)]); diff != "" {
		t.Errorf("the event log before the edits changed (-before +after):\n%s", diff)
	}
	var removed, updated int
	for _, ev := range eventsAfter[len(eventsBefore):] {
		switch {
		case ev.Type == core.EventMessageRemoved && strings.Contains(string(ev.Properties), second.Info.ID):
			removed++
		case ev.Type == core.EventPartUpdated && strings.Contains(string(ev.Properties), "ALPHA-EDITED"):
			updated++
		}
	}
	if removed != 1 || updated != 1 {
		t.Errorf("%d message.removed and %d message.part.updated events for the edits, want 1 and 1", removed, updated)
	}
	if _, err := n.app.Store.Message(t.Context(), sid, second.Info.ID); err == nil {
		t.Error("the deleted message is still read")
	}

	// While a run is active nothing changes.
	if err := n.c.SendAsync(t.Context(), sid, client.Prompt{Text: "sleep:30"}); err != nil {
		t.Fatal(err)
	}
	n.waitFor(sid, func(st core.SessionStatus) bool { return st.Type == core.StatusBusy })
	for _, c := range []struct{ method, path string }{{"DELETE", sp + "/message/" + first.Info.ID}, {"PATCH", partPath}, {"DELETE", partPath}} {
		code, body := edit(t, n, c.method, c.path, map[string]any{"type": "text", "text": "reply:during"})
		if code != http.StatusConflict || !strings.Contains(body, "SessionBusyError") {
			t.Errorf("%s %s while a run is active: %d %s", c.method, c.path, code, body)
		}
	}
	if _, err := n.c.Abort(t.Context(), sid); err != nil {
		t.Fatal(err)
	}
	n.waitIdle(sid)
	if m, err := n.app.Store.Message(t.Context(), sid, first.Info.ID); err != nil || m.Parts[0].Text != "reply:ALPHA-EDITED" {
		t.Errorf("after the refused edits: %+v %v", m.Parts, err)
	}
}
