package app_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/core"
)

// outsideFile makes a file outside the node's workspace.
func outsideFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "outside.txt")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func (n *node) waitPermission(sid string) client.PermissionRequest {
	n.t.Helper()
	n.waitFor(sid, func(st core.SessionStatus) bool { return st.Phase == core.PhaseWaitingPermission })
	list, err := n.c.Permissions(n.t.Context())
	if err != nil {
		n.t.Fatal(err)
	}
	for _, p := range list {
		if p.SessionID == sid {
			return p
		}
	}
	n.t.Fatalf("no pending permission for %s", sid)
	return client.PermissionRequest{}
}

func TestPermissionAskOnceRejectAlways(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	ctx := t.Context()
	secret := outsideFile(t, "outside secret\n")

	sid := n.session()
	if err := n.c.SendAsync(ctx, sid, client.Prompt{Text: `tool:read:{"filePath":"` + secret + `"}`}); err != nil {
		t.Fatal(err)
	}
	req := n.waitPermission(sid)
	if req.Permission != "external_directory" || req.Tool == nil || req.Patterns[0] != filepath.Dir(secret) {
		t.Errorf("request = %+v", req)
	}
	// While asked, the tool has not run: its part is shown running with
	// its input (as opencode's clients expect before an ask), marked as
	// not started.
	for _, m := range mustMessages(t, n, sid) {
		for _, p := range m.Parts {
			if p.Type != core.PartTool {
				continue
			}
			mark, _ := p.State.Metadata["agentd"].(map[string]any)
			if p.State.Status != core.ToolRunning || mark["waiting"] != "permission" || !strings.Contains(string(p.State.Input), "outside") {
				t.Errorf("tool part while waiting for permission: %s %s %v", p.State.Status, p.State.Input, p.State.Metadata)
			}
		}
	}
	if err := n.c.ReplyPermission(ctx, req.ID, "once", ""); err != nil {
		t.Fatal(err)
	}
	st := n.waitIdle(sid)
	if st.Last.Outcome != core.RunSucceeded {
		t.Fatalf("outcome = %+v", st.Last)
	}
	msgs := mustMessages(t, n, sid)
	if !strings.Contains(textOf(msgs[len(msgs)-1]), "outside secret") {
		t.Errorf("answer = %q", textOf(msgs[len(msgs)-1]))
	}
	if err := n.c.ReplyPermission(ctx, req.ID, "once", ""); err == nil {
		t.Error("a second reply was accepted")
	}

	// Reject: the model sees an error with the user's message.
	if err := n.c.SendAsync(ctx, sid, client.Prompt{Text: `tool:read:{"filePath":"` + secret + `"}`}); err != nil {
		t.Fatal(err)
	}
	req = n.waitPermission(sid)
	if err := n.c.ReplyPermission(ctx, req.ID, "reject", "not that file"); err != nil {
		t.Fatal(err)
	}
	n.waitIdle(sid)
	msgs = mustMessages(t, n, sid)
	if got := textOf(msgs[len(msgs)-1]); !strings.Contains(got, "rejected") || !strings.Contains(got, "not that file") {
		t.Errorf("answer after reject = %q", got)
	}

	// Always: the next access to that directory is not asked again.
	if err := n.c.SendAsync(ctx, sid, client.Prompt{Text: `tool:read:{"filePath":"` + secret + `"}`}); err != nil {
		t.Fatal(err)
	}
	req = n.waitPermission(sid)
	if err := n.c.ReplyPermission(ctx, req.ID, "always", ""); err != nil {
		t.Fatal(err)
	}
	n.waitIdle(sid)
	m := n.send(sid, `tool:read:{"filePath":"`+secret+`"}`)
	if !strings.Contains(textOf(m), "outside secret") {
		t.Errorf("after always = %q", textOf(m))
	}
	if list, _ := n.c.Permissions(ctx); len(list) != 0 {
		t.Errorf("pending after always = %+v", list)
	}
}

func TestPermissionRulesDenyAndDoomLoop(t *testing.T) {
	t.Parallel()
	n := startNode(t, func(c *app.Config) {
		c.Engine.MaxSteps = 4
		c.Engine.Permission = []core.Rule{
			{Permission: "bash", Pattern: "rm *", Action: core.ActionDeny},
			{Permission: "doom_loop", Pattern: "*", Action: core.ActionDeny},
		}
	})
	sid := n.session()
	m := n.send(sid, `tool:bash:{"command":"rm -rf important"}`)
	if !strings.Contains(textOf(m), "permission denied by rule: bash rm -rf important") {
		t.Errorf("answer = %q", textOf(m))
	}
	n.send(sid, `loop:echo:{"text":"again"}`)
	var states []string
	for _, mm := range mustMessages(t, n, sid) {
		for _, p := range mm.Parts {
			if p.Type == core.PartTool && p.Tool == "echo" {
				states = append(states, p.State.Status+":"+p.State.Error)
			}
		}
	}
	if len(states) < 3 || !strings.HasPrefix(states[0], "completed") || !strings.HasPrefix(states[1], "completed") || !strings.Contains(states[2], "doom_loop") {
		t.Errorf("echo calls = %v, want the third stopped by the doom-loop guard", states)
	}
}

func TestPermissionSurvivesRestart(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	secret := outsideFile(t, "kept across restarts\n")
	sid := n.session()
	if err := n.c.SendAsync(t.Context(), sid, client.Prompt{Text: `tool:read:{"filePath":"` + secret + `"}`}); err != nil {
		t.Fatal(err)
	}
	req := n.waitPermission(sid)
	n2 := n.restart()
	st := n2.status(sid)
	if st.Type != core.StatusBusy || st.Phase != core.PhaseWaitingPermission {
		t.Fatalf("status after restart = %+v, want busy/waiting_permission", st)
	}
	list, _ := n2.c.Permissions(t.Context())
	if len(list) != 1 || list[0].ID != req.ID {
		t.Fatalf("pending after restart = %+v", list)
	}
	if err := n2.c.ReplyPermission(t.Context(), req.ID, "once", ""); err != nil {
		t.Fatal(err)
	}
	st = n2.waitIdle(sid)
	if st.Last.Outcome != core.RunSucceeded {
		t.Fatalf("outcome = %+v", st.Last)
	}
	var tools []core.Part
	for _, m := range mustMessages(t, n2, sid) {
		for _, p := range m.Parts {
			if p.Type == core.PartTool {
				tools = append(tools, p)
			}
		}
	}
	if len(tools) != 1 || tools[0].State.Status != core.ToolCompleted || !strings.Contains(tools[0].State.Output, "kept across restarts") {
		t.Errorf("tool parts = %+v", tools)
	}
}

func TestAbortWhileWaitingPermission(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	secret := outsideFile(t, "x")
	sid := n.session()
	if err := n.c.SendAsync(t.Context(), sid, client.Prompt{Text: `tool:read:{"filePath":"` + secret + `"}`}); err != nil {
		t.Fatal(err)
	}
	n.waitPermission(sid)
	if ok, err := n.c.Abort(t.Context(), sid); err != nil || !ok {
		t.Fatalf("abort: %v %v", ok, err)
	}
	if list, _ := n.c.Permissions(t.Context()); len(list) != 0 {
		t.Errorf("request still pending after abort: %+v", list)
	}
	if st := n.status(sid); st.Last.Reason != core.ReasonAborted {
		t.Errorf("status = %+v", st)
	}
}

// TestClientRulesOnlyNarrow: a session's own rules cannot allow what the
// operator denies (or asks), but can narrow what it allows.
func TestClientRulesOnlyNarrow(t *testing.T) {
	t.Parallel()
	n := startNode(t, func(c *app.Config) {
		c.Engine.Permission = []core.Rule{{Permission: "bash", Pattern: "*", Action: core.ActionDeny}}
	})
	var sess client.Session
	body := `{"permission":[{"permission":"*","pattern":"*","action":"allow"},{"permission":"read","pattern":"*","action":"deny"}]}`
	resp, err := http.Post(n.app.URL()+"/session", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&sess)
	resp.Body.Close()
	marker := filepath.Join(n.cfg.Directory, "ran")
	m := n.send(sess.ID, fmt.Sprintf(`tool:bash:{"command":"touch %s"}`, marker))
	if _, err := os.Stat(marker); err == nil || !strings.Contains(textOf(m), "permission denied") {
		t.Errorf("a session's allow-all overrode the operator's bash deny: %q", textOf(m))
	}
	os.WriteFile(filepath.Join(n.cfg.Directory, "f.txt"), []byte("x"), 0o644)
	m = n.send(sess.ID, `tool:read:{"filePath":"f.txt"}`)
	if !strings.Contains(textOf(m), "permission denied") {
		t.Errorf("the session's own read deny was not applied: %q", textOf(m))
	}
}

// TestBashAsksByDefault: with no rule from the operator, bash asks; an
// "always" answer then allows the commands that were asked about, each by
// its own name, and nothing chained after them.
func TestBashAsksByDefault(t *testing.T) {
	t.Parallel()
	n := startNode(t, func(c *app.Config) { c.Engine.Permission = nil })
	sid := n.session()
	if err := n.c.SendAsync(t.Context(), sid, client.Prompt{Text: `tool:bash:{"command":"echo hi; id -u"}`}); err != nil {
		t.Fatal(err)
	}
	req := n.waitPermission(sid)
	if req.Permission != "bash" || strings.Join(req.Patterns, "|") != "echo hi|id -u" || strings.Join(req.Always, "|") != "echo *|id *" {
		t.Fatalf("asked %+v", req)
	}
	if err := n.c.ReplyPermission(t.Context(), req.ID, "always", ""); err != nil {
		t.Fatal(err)
	}
	n.waitIdle(sid)
	// The grant covers the same commands with other arguments.
	m := n.send(sid, `tool:bash:{"command":"echo ok; id"}`)
	if strings.Contains(textOf(m), "permission") || n.status(sid).Last.Outcome != core.RunSucceeded {
		t.Errorf("the granted commands asked again or failed: %q", textOf(m))
	}
	// A command chained or substituted after them still asks.
	for _, cmd := range []string{`echo ok; head -c 20 /etc/hostname`, "echo $(cat /etc/hostname) `id`"} {
		in, _ := json.Marshal(map[string]string{"command": cmd})
		if err := n.c.SendAsync(t.Context(), sid, client.Prompt{Text: "tool:bash:" + string(in)}); err != nil {
			t.Fatal(err)
		}
		req = n.waitPermission(sid)
		if req.Permission != "bash" && req.Permission != "external_directory" {
			t.Errorf("%s: asked %+v", cmd, req)
		}
		if err := n.c.ReplyPermission(t.Context(), req.ID, "reject", ""); err != nil {
			t.Fatal(err)
		}
		n.waitIdle(sid)
	}
}

// TestFileRoutesFollowReadRules: what the operator denies the tools to
// read, GET /file/content and /find do not show either.
func TestFileRoutesFollowReadRules(t *testing.T) {
	t.Parallel()
	n := startNode(t, func(c *app.Config) {
		c.Engine.Permission = append(c.Engine.Permission, core.Rule{Permission: "read", Pattern: "*.env", Action: core.ActionDeny})
	})
	os.WriteFile(filepath.Join(n.cfg.Directory, "prod.env"), []byte("TOKEN=secret\n"), 0o644)
	os.WriteFile(filepath.Join(n.cfg.Directory, "ok.txt"), []byte("TOKEN is documented\n"), 0o644)
	get := func(path string) (int, string) {
		resp, err := http.Get(n.app.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, body := get("/file/content?path=prod.env"); st != http.StatusForbidden {
		t.Errorf("denied file: %d %s", st, body)
	}
	if st, body := get("/find?pattern=TOKEN"); st != 200 || strings.Contains(body, "secret") || !strings.Contains(body, "ok.txt") {
		t.Errorf("find: %d %s", st, body)
	}
}

// TestQuestions: the question tool (on when the operator turns it on)
// asks durably: GET /question lists it, the status says the run waits for
// an answer, a restart keeps it asked, the answer becomes the call's
// result; a dismissal is an error the model sees.
func TestQuestions(t *testing.T) {
	t.Parallel()
	n := startNode(t, func(c *app.Config) { c.Engine.Questions = true })
	ctx := t.Context()
	sid := n.session()
	ask := `tool:question:{"questions":[{"question":"Which database?","header":"Database","options":[{"label":"SQLite","description":"embedded"},{"label":"PostgreSQL","description":"shared"}]}]}`
	if err := n.c.SendAsync(ctx, sid, client.Prompt{Text: ask + "\nreply:noted"}); err != nil {
		t.Fatal(err)
	}
	st := n.waitFor(sid, func(st core.SessionStatus) bool { return st.Phase == core.PhaseWaitingQuestion })
	if st.Type != core.StatusBusy {
		t.Fatalf("status = %+v", st)
	}
	n = n.restart()
	list := func() []core.OpencodeQuestion {
		resp, err := http.Get(n.app.URL() + "/question")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var l []core.OpencodeQuestion
		json.NewDecoder(resp.Body).Decode(&l)
		return l
	}
	qs := list()
	if len(qs) != 1 || qs[0].Questions[0].Header != "Database" || qs[0].Tool == nil {
		t.Fatalf("GET /question after restart = %+v", qs)
	}
	if st := n.status(sid); st.Phase != core.PhaseWaitingQuestion {
		t.Errorf("status after restart = %+v", st)
	}
	resp, err := http.Post(n.app.URL()+"/question/"+qs[0].ID+"/reply", "application/json", strings.NewReader(`{"answers":[["PostgreSQL"]]}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("reply: %v %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	n.waitIdle(sid)
	p := n.lastToolPart(sid)
	if p == nil || p.State.Status != core.ToolCompleted || !strings.Contains(p.State.Output, "PostgreSQL") {
		t.Fatalf("question call = %+v", p)
	}
	if len(list()) != 0 {
		t.Error("an answered question is still listed")
	}
	resp, _ = http.Post(n.app.URL()+"/question/"+qs[0].ID+"/reply", "application/json", strings.NewReader(`{"answers":[]}`))
	if resp.StatusCode != http.StatusConflict {
		t.Errorf("second answer: %d", resp.StatusCode)
	}
	resp.Body.Close()
	resp, _ = http.Post(n.app.URL()+"/question/que_nope/reject", "application/json", nil)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || !strings.Contains(string(body), `"_tag":"QuestionNotFoundError"`) {
		t.Errorf("unknown question: %d %s", resp.StatusCode, body)
	}
	// Dismissed: the model sees an error.
	if err := n.c.SendAsync(ctx, sid, client.Prompt{Text: ask + "\nreply:ok"}); err != nil {
		t.Fatal(err)
	}
	n.waitFor(sid, func(st core.SessionStatus) bool { return st.Phase == core.PhaseWaitingQuestion })
	qs = list()
	resp, _ = http.Post(n.app.URL()+"/question/"+qs[0].ID+"/reject", "application/json", nil)
	resp.Body.Close()
	n.waitIdle(sid)
	if p := n.lastToolPart(sid); p == nil || p.State.Status != core.ToolError || !strings.Contains(p.State.Error, "dismissed") {
		t.Errorf("dismissed question call = %+v", p)
	}
}
