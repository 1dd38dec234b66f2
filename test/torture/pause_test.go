package torture

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/pause"
)

// TestKillPaused kills agentd (SIGKILL) mid-run on a server configured
// with agentd.resume "paused": after the restart the run is held (busy,
// phase paused, with the reason) and nothing of it executes — a session
// set to resume "auto", cut off beside it, resumes and completes meanwhile
// — until POST /session/{id}/resume, after which it completes; it ended
// once.
func TestKillPaused(t *testing.T) {
	srv, c, dbPath := crashNodeWith(t, 100*time.Millisecond, `{}`, `,"agentd":{"resume":"paused"}`)
	ctx := t.Context()
	call := func(method, path, body string) (int, string) {
		t.Helper()
		return callAPI(t, method, srv.url+path, body)
	}
	var sids []string
	for range 2 {
		s, err := c.CreateSession(ctx, "", "")
		if err != nil {
			t.Fatal(err)
		}
		sids = append(sids, s.ID)
	}
	held, auto := sids[0], sids[1]
	if code, b := call("PATCH", "/session/"+auto, `{"resume":"auto"}`); code != 200 {
		t.Fatalf("PATCH: %d %s", code, b)
	}
	for _, sid := range sids {
		if err := c.SendAsync(ctx, sid, client.Prompt{Text: "sleep:30\nreply:done"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, sid := range sids {
		waitStatus(t, c, sid, func(st core.SessionStatus) bool { return st.Type == core.StatusBusy })
	}
	srv.kill()
	srv.start()

	st, err := c.Wait(ctx, auto, "", time.Minute)
	if err != nil || st.Last == nil || st.Last.Outcome != core.RunSucceeded {
		t.Fatalf("the auto session after the restart: %+v %v", st, err)
	}
	msgs, err := c.Messages(ctx, held)
	if err != nil {
		t.Fatal(err)
	}
	st, err = c.Status(ctx, held)
	if err != nil || st.Type != core.StatusBusy || st.Phase != core.PhasePaused || st.Message != pause.ServerReason {
		t.Fatalf("held session's status: %+v %v", st, err)
	}
	if code, b := call("GET", "/api/session/"+held, ""); code != 200 || !strings.Contains(b, `"paused":`) {
		t.Errorf("v2 session: %d %s", code, b)
	}
	if code, b := call("POST", "/session/"+held+"/resume", ""); code != 200 {
		t.Fatalf("resume: %d %s", code, b)
	}
	st, err = c.Wait(ctx, held, "", time.Minute)
	if err != nil || st.Last == nil || st.Last.Outcome != core.RunSucceeded {
		t.Fatalf("the resumed session: %+v %v", st, err)
	}
	after, err := c.Messages(ctx, held)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) <= len(msgs) || !strings.Contains(textOfParts(after[len(after)-1].Parts), "done") {
		t.Errorf("the resumed run did not answer: %d messages, %d while held", len(after), len(msgs))
	}
	srv.stop()
	checkStore(t, dbPath)
}

// callAPI sends a JSON request and returns the status and the body.
func callAPI(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
