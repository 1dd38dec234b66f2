package app_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/pause"
)

// raw sends a JSON request to the node and returns the status and body.
func (n *node) raw(method, path, body string) (int, []byte) {
	n.t.Helper()
	req, err := http.NewRequestWithContext(n.t.Context(), method, n.app.URL()+path, strings.NewReader(body))
	if err != nil {
		n.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		n.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		n.t.Fatal(err)
	}
	return resp.StatusCode, b
}

// startLong starts a run that streams for a while and waits until it has
// written some of it, so that a restart cuts it off mid-run.
func (n *node) startLong(sid string) {
	n.t.Helper()
	if err := n.c.SendAsync(n.t.Context(), sid, client.Prompt{Text: "sleep:40\nreply:done"}); err != nil {
		n.t.Fatal(err)
	}
	n.streamingStarted(sid, "")
}

// messageCount is how many messages the session's transcript holds.
func (n *node) messageCount(sid string) int { return len(mustMessages(n.t, n, sid)) }

// TestStartPaused: a server started paused holds every run a restart cut
// off — status busy, phase paused, with the reason, in both APIs — and
// executes none of them (a session set to auto beside it resumes and
// completes meanwhile) until POST /session/{id}/resume, after which the
// run completes; a second resume answers 409.
func TestStartPaused(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	held, auto := n.session(), n.session()
	if code, b := n.raw("PATCH", "/session/"+auto, `{"resume":"auto"}`); code != 200 || !strings.Contains(string(b), `"resume":"auto"`) {
		t.Fatalf("PATCH resume auto: %d %s", code, b)
	}
	n.startLong(held)
	n.startLong(auto)
	n = n.restart(func(c *app.Config) { c.Engine.Pause.Server = true })

	// The session set to auto resumes on its own and completes.
	if st := n.waitIdle(auto); st.Last == nil || st.Last.Outcome != core.RunSucceeded {
		t.Fatalf("auto session ended %+v", st.Last)
	}
	// The other is still held, its transcript as the restart left it.
	before := n.messageCount(held)
	st := n.status(held)
	if st.Type != core.StatusBusy || st.Phase != core.PhasePaused || st.Message != pause.ServerReason {
		t.Fatalf("held session's status = %+v", st)
	}
	var v2 struct {
		Data struct {
			Paused string `json:"paused"`
		} `json:"data"`
	}
	code, b := n.raw("GET", "/api/session/"+held, "")
	if err := json.Unmarshal(b, &v2); err != nil || code != 200 || v2.Data.Paused != pause.ServerReason {
		t.Errorf("v2 session = %d %s", code, b)
	}
	var active map[string]core.SessionStatus
	if code, b := n.raw("GET", "/session/active", ""); code != 200 || json.Unmarshal(b, &active) != nil || active[held].Phase != core.PhasePaused {
		t.Errorf("/session/active = %d %s", code, b)
	}

	if code, b := n.raw("POST", "/session/"+held+"/resume", ""); code != 200 {
		t.Fatalf("resume: %d %s", code, b)
	}
	st = n.waitIdle(held)
	if st.Last == nil || st.Last.Outcome != core.RunSucceeded {
		t.Fatalf("resumed run ended %+v", st.Last)
	}
	msgs := mustMessages(t, n, held)
	if len(msgs) <= before || !strings.Contains(textOf(msgs[len(msgs)-1]), "done") {
		t.Errorf("the resumed run did not complete its answer: %d messages (%d before)", len(msgs), before)
	}
	if code, b := n.raw("POST", "/session/"+held+"/resume", ""); code != http.StatusConflict {
		t.Errorf("second resume: %d %s, want 409", code, b)
	}
}

// TestSessionPaused: on a server that resumes on its own, a session set
// to resume paused is held after a restart while another resumes; an abort
// ends the held run interrupted/aborted; bad settings are refused.
func TestSessionPaused(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	held, other := n.session(), n.session()
	if code, b := n.raw("PATCH", "/session/"+held, `{"resume":"paused"}`); code != 200 {
		t.Fatalf("PATCH resume paused: %d %s", code, b)
	}
	for _, body := range []string{`{"resume":"later"}`, `{"asks":{"timeout":"soon"}}`, `{"asks":{"onTimeout":"allow"}}`} {
		if code, b := n.raw("PATCH", "/session/"+held, body); code != http.StatusBadRequest {
			t.Errorf("PATCH %s: %d %s, want 400", body, code, b)
		}
	}
	n.startLong(held)
	n.startLong(other)
	n = n.restart()
	if st := n.waitIdle(other); st.Last == nil || st.Last.Outcome != core.RunSucceeded {
		t.Fatalf("other session ended %+v", st.Last)
	}
	if st := n.status(held); st.Phase != core.PhasePaused || st.Message != pause.SessionReason {
		t.Fatalf("held session's status = %+v", st)
	}
	if ok, err := n.c.Abort(t.Context(), held); err != nil || !ok {
		t.Fatalf("abort: %v %v", ok, err)
	}
	if st := n.waitIdle(held); st.Last == nil || st.Last.Outcome != core.RunInterrupted || st.Last.Reason != core.ReasonAborted {
		t.Errorf("aborted held run ended %+v", st.Last)
	}
}

// TestResumeConfig: agentd.resume takes true, false or "paused"; anything
// else is an error.
func TestResumeConfig(t *testing.T) {
	t.Parallel()
	for body, want := range map[string][2]bool{
		`{"agentd":{"resume":"paused"}}`: {true, true},
		`{"agentd":{"resume":false}}`:    {false, false},
		`{"agentd":{"resume":true}}`:     {true, false},
		`{}`:                             {true, false},
	} {
		cfg, _, err := app.Configure(app.Setup{Workspace: t.TempDir(), ConfigFile: writeConfig(t, body)}, app.Config{})
		if err != nil || cfg.Engine.Resume != want[0] || cfg.Engine.Pause.Server != want[1] {
			t.Errorf("%s: resume %v paused %v (%v), want %v", body, cfg.Engine.Resume, cfg.Engine.Pause.Server, err, want)
		}
	}
	if _, _, err := app.Configure(app.Setup{Workspace: t.TempDir(), ConfigFile: writeConfig(t, `{"agentd":{"resume":"later"}}`)}, app.Config{}); err == nil ||
		!strings.Contains(err.Error(), "paused") {
		t.Errorf("resume \"later\": err = %v", err)
	}
}

// TestPausedAsk: a run cut off while it waited for a permission is held
// too (its status says paused, not waiting_permission). An answer given
// meanwhile is recorded but the run stays held, and the resume takes it up
// with that answer; a run resumed unanswered waits for its answer again.
// Both complete.
func TestPausedAsk(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	answered, later := n.session(), n.session()
	reqs := map[string]client.PermissionRequest{}
	for _, sid := range []string{answered, later} {
		if err := n.c.SendAsync(t.Context(), sid, client.Prompt{Text: askKinds[0].prompt(t)}); err != nil {
			t.Fatal(err)
		}
		reqs[sid] = n.waitPermission(sid)
	}
	n = n.restart(func(c *app.Config) { c.Engine.Pause.Server = true })
	for _, sid := range []string{answered, later} {
		if st := n.status(sid); st.Phase != core.PhasePaused {
			t.Fatalf("status after the restart = %+v", st)
		}
	}
	if err := n.c.ReplyPermission(t.Context(), reqs[answered].ID, core.ReplyOnce, ""); err != nil {
		t.Fatal(err)
	}
	if st := n.status(answered); st.Phase != core.PhasePaused {
		t.Fatalf("an answer took the run out of its pause: %+v", st)
	}
	for _, sid := range []string{answered, later} {
		if code, b := n.raw("POST", "/session/"+sid+"/resume", ""); code != 200 {
			t.Fatalf("resume: %d %s", code, b)
		}
	}
	if st := n.status(later); st.Phase != core.PhaseWaitingPermission {
		t.Errorf("resumed unanswered: %+v, want waiting_permission", st)
	}
	if err := n.c.ReplyPermission(t.Context(), reqs[later].ID, core.ReplyOnce, ""); err != nil {
		t.Fatal(err)
	}
	for _, sid := range []string{answered, later} {
		st := n.waitIdle(sid)
		if st.Last == nil || st.Last.Outcome != core.RunSucceeded || !strings.Contains(textOf(n.lastAssistant(sid)), "read") {
			t.Errorf("resumed run ended %+v: %q", st.Last, textOf(n.lastAssistant(sid)))
		}
	}
}
