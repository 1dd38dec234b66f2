package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/asks"
	"github.com/agentd/agentd/internal/clock"
	"github.com/agentd/agentd/internal/core"
)

// questionAsk is a prompt whose model asks the user one question.
const questionAsk = `tool:question:{"questions":[{"question":"Which database?","header":"Database","options":[{"label":"SQLite","description":"embedded"}]}]}`

// withAsks sets the node's ask policy, on the fake clock clk.
func withAsks(s asks.Settings, clk *clock.Fake) option {
	return func(c *app.Config) {
		c.Engine.Asks = asks.Policy{Settings: s, Clock: clk}
		c.Engine.Questions = true
	}
}

// waitTimers waits until n timers wait on the fake clock: the runner has
// armed its ask's timeout.
func waitTimers(t *testing.T, clk *clock.Fake, n int) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		got, changed := clk.Waiting()
		if got == n {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("%d timers on the clock, want %d", got, n)
		}
	}
}

// askEnd is how a run's ask ended, as the store recorded it.
type askEnd struct {
	reply, by string
	rejected  bool // a question's dismissal
}

// askEnds reads the asks of the session's last run.
func (n *node) askEnds(sid string) (core.Run, []askEnd) {
	n.t.Helper()
	runs, err := n.app.Store.Runs(n.t.Context(), sid, 1)
	if err != nil || len(runs) != 1 {
		n.t.Fatalf("runs: %v %v", runs, err)
	}
	var out []askEnd
	perms, err := n.app.Store.RunPermissions(n.t.Context(), runs[0].ID)
	if err != nil {
		n.t.Fatal(err)
	}
	for _, p := range perms {
		out = append(out, askEnd{reply: p.Reply, by: p.By})
	}
	qs, err := n.app.Store.RunQuestions(n.t.Context(), runs[0].ID)
	if err != nil {
		n.t.Fatal(err)
	}
	for _, q := range qs {
		out = append(out, askEnd{by: q.By, rejected: q.Rejected})
	}
	return runs[0], out
}

// askKinds are the two asks: a permission request and a question.
var askKinds = []struct {
	name  string
	phase core.Phase
	// prompt makes the model ask; t's temporary folder holds a file
	// outside the workspace for the permission.
	prompt func(t *testing.T) string
	// replied is the event that records the ask's end.
	replied string
}{
	{"permission", core.PhaseWaitingPermission, func(t *testing.T) string {
		return `tool:read:{"filePath":"` + outsideFile(t, "secret\n") + `"}` + "\nreply:read"
	}, core.EventPermissionReplied},
	{"question", core.PhaseWaitingQuestion, func(*testing.T) string { return questionAsk + "\nreply:noted" }, core.EventQuestionRejected},
}

// TestAskEndsOnTime: an ask nobody answers ends when its timeout passes,
// not before: with policy reject the turn ends as on a user's reject
// (interrupted, rejected), with interrupt the run ends
// interrupted/ask_timeout; either way the ask's end is recorded as an
// answer by "timeout", with its event.
func TestAskEndsOnTime(t *testing.T) {
	t.Parallel()
	for _, kind := range askKinds {
		for _, c := range []struct {
			action asks.Action
			reason core.EndReason
		}{{asks.Reject, core.ReasonRejected}, {asks.Interrupt, core.ReasonAskTimeout}} {
			t.Run(kind.name+"/"+string(c.action), func(t *testing.T) {
				t.Parallel()
				clk := clock.NewFake(time.Now())
				n := startNode(t, withAsks(asks.Settings{Timeout: 2 * time.Minute, OnTimeout: c.action}, clk))
				sid := n.session()
				if err := n.c.SendAsync(t.Context(), sid, client.Prompt{Text: kind.prompt(t)}); err != nil {
					t.Fatal(err)
				}
				n.waitFor(sid, func(st core.SessionStatus) bool { return st.Phase == kind.phase })
				waitTimers(t, clk, 1)
				clk.Advance(2*time.Minute - 10*time.Second)
				if got, _ := clk.Waiting(); got != 1 {
					t.Fatal("the ask ended before its timeout")
				}
				if st := n.status(sid); st.Phase != kind.phase {
					t.Fatalf("status before the timeout = %+v", st)
				}
				clk.Advance(20 * time.Second)
				st := n.waitIdle(sid)
				checkAskEnd(t, n, sid, st, c.reason, asks.ByTimeout, kind.replied)
			})
		}
	}
}

// checkAskEnd checks that the session's last run ended interrupted for
// reason, its call failed saying that nobody answered, and its one ask
// was ended by by.
func checkAskEnd(t *testing.T, n *node, sid string, st core.SessionStatus, reason core.EndReason, by, replied string) {
	t.Helper()
	if st.Last == nil || st.Last.Outcome != core.RunInterrupted || st.Last.Reason != reason {
		t.Fatalf("run ended %+v, want interrupted/%s", st.Last, reason)
	}
	run, ends := n.askEnds(sid)
	if len(ends) != 1 || ends[0].by != by || (ends[0].reply != core.ReplyReject && !ends[0].rejected) {
		t.Errorf("asks of the run = %+v, want one rejected by %s", ends, by)
	}
	if p := n.lastToolPart(sid); p == nil || p.State.Status != core.ToolError || !strings.Contains(p.State.Error, "Nobody answered") {
		t.Errorf("the call that asked = %+v, want an error saying nobody answered", p)
	}
	if m := n.lastAssistant(sid); strings.Contains(textOf(m), "read") || strings.Contains(textOf(m), "noted") {
		t.Errorf("the model went on after the ask: %q", textOf(m))
	}
	seen := 0
	for _, ev := range n.allEvents() {
		if ev.Type == replied && ev.SessionID == sid {
			seen++
		}
	}
	if seen != 1 {
		t.Errorf("%d %s events for run %s, want 1", seen, replied, run.ID)
	}
}

func (n *node) lastAssistant(sid string) client.MessageWithParts {
	n.t.Helper()
	msgs := mustMessages(n.t, n, sid)
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Info.Role == core.RoleAssistant {
			return msgs[i]
		}
	}
	return client.MessageWithParts{}
}

// TestAskTimeoutAcrossRestart: the timeout counts from the ask's creation
// as stored, so an ask that became overdue while the server was down ends
// as soon as its run is resumed, by either policy.
func TestAskTimeoutAcrossRestart(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		action asks.Action
		reason core.EndReason
	}{{asks.Reject, core.ReasonRejected}, {asks.Interrupt, core.ReasonAskTimeout}} {
		t.Run(string(c.action), func(t *testing.T) {
			t.Parallel()
			clk := clock.NewFake(time.Now())
			n := startNode(t, withAsks(asks.Settings{Timeout: time.Minute, OnTimeout: c.action}, clk))
			sid := n.session()
			if err := n.c.SendAsync(t.Context(), sid, client.Prompt{Text: askKinds[0].prompt(t)}); err != nil {
				t.Fatal(err)
			}
			n.waitPermission(sid)
			n = n.restart(func(*app.Config) { clk.Advance(2 * time.Minute) })
			st := n.waitIdle(sid)
			checkAskEnd(t, n, sid, st, c.reason, asks.ByTimeout, core.EventPermissionReplied)
		})
	}
}

// TestNonInteractivePrompt: a prompt sent with "interactive": false has
// every ask of its run answered by the rules at once, with no timeout
// configured: rejected (the turn ends), or allowed once when the operator
// listed its patterns; the v2 prompt takes the same field.
func TestNonInteractivePrompt(t *testing.T) {
	t.Parallel()
	secret := outsideFile(t, "outside secret\n")
	n := startNode(t, func(c *app.Config) {
		c.Engine.Asks = asks.Policy{Agents: map[string]asks.Settings{
			"plan": {Allow: map[string][]string{"external_directory": {filepath.Dir(secret)}}},
		}}
	})
	read := `tool:read:{"filePath":"` + secret + `"}` + "\nreply:read it"
	sid := n.session()
	if _, err := n.c.Send(t.Context(), sid, client.Prompt{Text: read, NonInteractive: true}); err != nil {
		t.Fatal(err)
	}
	checkAskEnd(t, n, sid, n.status(sid), core.ReasonRejected, asks.ByRules, core.EventPermissionReplied)

	// The plan agent's allow list covers the directory.
	sid = n.session()
	m, err := n.c.Send(t.Context(), sid, client.Prompt{Text: read, NonInteractive: true, Agent: "plan"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ends := n.askEnds(sid); len(ends) != 1 || ends[0].reply != core.ReplyOnce || ends[0].by != asks.ByRules {
		t.Errorf("asks = %+v, want one allowed once by the rules", ends)
	}
	if st := n.status(sid); st.Last.Outcome != core.RunSucceeded || !strings.Contains(textOf(m), "read it") {
		t.Errorf("allowed run ended %+v: %q", st.Last, textOf(m))
	}

	// opencode 2's prompt.
	sid = n.session()
	body := `{"prompt":{"text":` + string(must(json.Marshal(read))) + `},"interactive":false}`
	resp, err := http.Post(n.app.URL()+"/api/session/"+sid+"/prompt", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("v2 prompt: %s", resp.Status)
	}
	checkAskEnd(t, n, sid, n.waitIdle(sid), core.ReasonRejected, asks.ByRules, core.EventPermissionReplied)

	// A prompt that says nothing still waits for a person.
	sid = n.session()
	if err := n.c.SendAsync(t.Context(), sid, client.Prompt{Text: read}); err != nil {
		t.Fatal(err)
	}
	req := n.waitPermission(sid)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := n.c.ReplyPermission(ctx, req.ID, core.ReplyOnce, ""); err != nil {
		t.Fatal(err)
	}
	if st := n.waitIdle(sid); st.Last.Outcome != core.RunSucceeded {
		t.Errorf("interactive run ended %+v", st.Last)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestAsksConfig: agentd.asks is read from the operator's files (the
// project's is refused with a warning: its allow list would widen what the
// model may do); an agent's keys replace the server's; bad values are
// errors naming the key.
func TestAsksConfig(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "agentd.json"), []byte(`{"agentd":{"asks":{"allow":{"bash":["*"]}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	op := writeConfig(t, `{"agentd":{"asks":{"timeout":"2m","onTimeout":"interrupt","allow":{"bash":["go test *"]},
		"agent":{"plan":{"timeout":"0"},"build":{"onTimeout":"reject"}}}}}`)
	cfg, loaded, err := app.Configure(app.Setup{Workspace: ws, ConfigFile: op}, app.Config{})
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Engine.Asks
	if p.Timeout != 2*time.Minute || p.OnTimeout != asks.Interrupt || len(p.Allow["bash"]) != 1 || p.Allow["bash"][0] != "go test *" {
		t.Errorf("server's asks = %+v", p.Settings)
	}
	if pl := p.Agents["plan"]; pl.Timeout != 0 || pl.OnTimeout != asks.Interrupt {
		t.Errorf("plan's asks = %+v", pl)
	}
	if b := p.Agents["build"]; b.Timeout != 2*time.Minute || b.OnTimeout != asks.Reject || len(b.Allow["bash"]) != 1 {
		t.Errorf("build's asks = %+v", b)
	}
	warned := false
	for _, w := range loaded.Warnings {
		warned = warned || w.Key == "agentd.asks"
	}
	if !warned {
		t.Errorf("the project's asks block was ignored silently: %+v", loaded.Warnings)
	}
	for body, key := range map[string]string{
		`{"agentd":{"asks":{"timeout":"soon"}}}`:                           "agentd.asks.timeout",
		`{"agentd":{"asks":{"onTimeout":"allow"}}}`:                        "agentd.asks.onTimeout",
		`{"agentd":{"asks":{"agent":{"plan":{"timeout":"-1s"}}}}}`:         "agentd.asks.agent.plan.timeout",
		`{"agentd":{"asks":{"agent":{"plan":{"onTimeout":"sometimes"}}}}}`: "agentd.asks.agent.plan.onTimeout",
	} {
		_, _, err := app.Configure(app.Setup{Workspace: t.TempDir(), ConfigFile: writeConfig(t, body)}, app.Config{})
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: err = %v, want one naming %s", body, err, key)
		}
	}
}

// TestSessionAsks: a session's own asks settings (PATCH /session/{id})
// apply over the server's: on a server whose asks wait for ever, the
// session's timeout ends an ask on time with the session's policy, while
// another session's ask still waits.
func TestSessionAsks(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Now())
	n := startNode(t, withAsks(asks.Settings{}, clk))
	sid, other := n.session(), n.session()
	if code, b := n.raw("PATCH", "/session/"+sid, `{"asks":{"timeout":"1m","onTimeout":"interrupt"}}`); code != 200 ||
		!strings.Contains(string(b), `"onTimeout":"interrupt"`) {
		t.Fatalf("PATCH asks: %d %s", code, b)
	}
	for _, s := range []string{other, sid} {
		if err := n.c.SendAsync(t.Context(), s, client.Prompt{Text: askKinds[0].prompt(t)}); err != nil {
			t.Fatal(err)
		}
		n.waitPermission(s)
	}
	waitTimers(t, clk, 1)
	clk.Advance(2 * time.Minute) // the fake clock started before the ask
	checkAskEnd(t, n, sid, n.waitIdle(sid), core.ReasonAskTimeout, asks.ByTimeout, core.EventPermissionReplied)
	if st := n.status(other); st.Phase != core.PhaseWaitingPermission {
		t.Errorf("the other session's ask ended: %+v", st)
	}
}

// TestAskAllowedOnTimeout: a permission request whose patterns the
// operator listed is allowed once when its timeout passes (even with
// policy interrupt), recorded as answered once by "timeout", and the run
// goes on with the call.
func TestAskAllowedOnTimeout(t *testing.T) {
	t.Parallel()
	secret := outsideFile(t, "outside secret\n")
	clk := clock.NewFake(time.Now())
	n := startNode(t, withAsks(asks.Settings{Timeout: time.Minute, OnTimeout: asks.Interrupt,
		Allow: map[string][]string{"external_directory": {filepath.Dir(secret)}}}, clk))
	sid := n.session()
	if err := n.c.SendAsync(t.Context(), sid, client.Prompt{Text: `tool:read:{"filePath":"` + secret + `"}` + "\nreply:read it"}); err != nil {
		t.Fatal(err)
	}
	n.waitPermission(sid)
	waitTimers(t, clk, 1)
	clk.Advance(2 * time.Minute) // the fake clock started before the ask
	st := n.waitIdle(sid)
	if st.Last == nil || st.Last.Outcome != core.RunSucceeded || !strings.Contains(textOf(n.lastAssistant(sid)), "read it") {
		t.Fatalf("run ended %+v: %q", st.Last, textOf(n.lastAssistant(sid)))
	}
	if _, ends := n.askEnds(sid); len(ends) != 1 || ends[0].reply != core.ReplyOnce || ends[0].by != asks.ByTimeout {
		t.Errorf("asks = %+v, want one allowed once by the timeout", ends)
	}
	if p := n.lastToolPart(sid); p == nil || p.State.Status != core.ToolCompleted || !strings.Contains(p.State.Output, "outside secret") {
		t.Errorf("the allowed call = %+v", p)
	}
}
