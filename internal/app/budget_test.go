package app_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/access"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/llm/scripted"
	"github.com/agentd/agentd/internal/store/postgres/pgtest"
)

// priced makes the scripted model cost a cent per thousand tokens.
func priced(c *app.Config) {
	c.Models = llm.NewRegistry()
	c.Models.Add(scripted.ProviderID, &scripted.Model{}, map[string]llm.Model{
		"scripted": {Name: "scripted", Cost: &llm.Price{Input: 10, Output: 10}},
	})
}

// threeSteps is a prompt whose run calls the model three times, each call
// counting 110 tokens ($0.0011).
const threeSteps = "usage:100,10\ntool:echo:{\"text\":\"one\"}\ntool:echo:{\"text\":\"two\"}\nreply:done"

// budgetError returns the run's end, failing the test unless it is
// budget_exceeded.
func budgetError(t *testing.T, st core.SessionStatus) map[string]any {
	t.Helper()
	if st.Last == nil || st.Last.Outcome != core.RunFailed || st.Last.Reason != core.ReasonBudgetExceeded || st.Last.Error == nil {
		t.Fatalf("the run's end: %+v, want failed/budget_exceeded", st.Last)
	}
	return st.Last.Error.Data.Extra
}

// TestBudgetStopsTheRunThatCrossesIt: a session's token cap stops its run
// before the model call after the one that crossed it, failed with
// budget_exceeded and the figures; GET /session/{id} shows the cap and the
// spend; a cost cap does the same in dollars; lifting the caps lets the
// session run again.
func TestBudgetStopsTheRunThatCrossesIt(t *testing.T) {
	t.Parallel()
	n := startNode(t, priced)
	ctx := t.Context()
	sid := n.session()
	if _, err := n.c.SetSessionBudget(ctx, sid, &client.Budget{Tokens: 150}); err != nil {
		t.Fatal(err)
	}
	n.send(sid, threeSteps)
	st := n.waitIdle(sid)
	x := budgetError(t, st)
	if x["budget"] != "session" || x["exceeded"] != "tokens" || fmt.Sprint(x["spent"]) != "map[cost:0.0022 tokens:220]" ||
		!strings.Contains(st.Last.Error.Data.Message, "220 tokens of its 150-token budget") {
		t.Errorf("the run's error: %s %v", st.Last.Error.Data.Message, x)
	}
	runs, err := n.c.Runs(ctx, sid)
	if err != nil || len(runs) != 1 || runs[0].Steps != 2 {
		t.Fatalf("runs: %+v, %v; want one of two steps (the third call never made)", runs, err)
	}
	sess, err := n.c.Session(ctx, sid)
	if err != nil || sess.Budget == nil || sess.Budget.Tokens != 150 || sess.Budget.Spent == nil || sess.Budget.Spent.Tokens != 220 {
		t.Fatalf("GET /session/{id}: budget %+v, %v", sess.Budget, err)
	}

	// The session has spent its budget: the next run stops before its
	// first call.
	n.send(sid, "reply:again")
	if st := n.waitIdle(sid); budgetError(t, st) != nil {
		if runs, _ := n.c.Runs(ctx, sid); runs[0].Steps != 0 {
			t.Errorf("a run of a spent session made %d calls", runs[0].Steps)
		}
	}
	// Dollars: $0.003 allows the first two calls ($0.0022) and one more.
	if _, err := n.c.SetSessionBudget(ctx, sid, &client.Budget{Cost: 0.003}); err != nil {
		t.Fatal(err)
	}
	n.send(sid, threeSteps)
	x = budgetError(t, n.waitIdle(sid))
	if x["exceeded"] != "cost" || fmt.Sprint(x["limit"]) != "map[cost:0.003 tokens:0]" {
		t.Errorf("the cost cap's figures: %v", x)
	}
	if _, err := n.c.SetSessionBudget(ctx, sid, nil); err != nil {
		t.Fatal(err)
	}
	n.send(sid, "reply:free")
	if st := n.waitIdle(sid); st.Last.Outcome != core.RunSucceeded {
		t.Errorf("after the caps were lifted: %+v", st.Last)
	}
	if sess, _ := n.c.Session(ctx, sid); sess.Budget != nil {
		t.Errorf("lifted caps still shown: %+v", sess.Budget)
	}
}

// TestKeyBudgetAcrossSessions: a key's cap counts every session made
// through it; once one session's runs spent it, the key's other sessions
// stop before their first call, and the operator's are not touched.
func TestKeyBudgetAcrossSessions(t *testing.T) {
	t.Parallel()
	k := startKeyed(t, priced)
	ctx := t.Context()
	made, ci := k.key("ci", "own", &client.Budget{Tokens: 150})
	first, err := ci.CreateSession(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	// Two calls: 110 tokens spent before the second, below the cap.
	if _, err := ci.Send(ctx, first.ID, client.Prompt{Text: "usage:100,10\ntool:echo:{\"text\":\"x\"}\nreply:ok"}); err != nil {
		t.Fatal(err)
	}
	second, err := ci.CreateSession(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = ci.Send(ctx, second.ID, client.Prompt{Text: "reply:hi"})
	st, err := ci.Wait(ctx, second.ID, "", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	x := budgetError(t, st)
	if x["budget"] != "key" || x["key"] != made.ID || !strings.Contains(st.Last.Error.Data.Message, "API key ci") ||
		!strings.Contains(st.Last.Error.Data.Message, "220 tokens of its 150-token budget") {
		t.Errorf("the key's budget error: %s %v", st.Last.Error.Data.Message, x)
	}
	keys, err := k.op.Keys(ctx)
	if err != nil || len(keys) != 1 || keys[0].Budget.Spent == nil || keys[0].Budget.Spent.Tokens != 220 {
		t.Fatalf("the key's spend: %+v, %v", keys, err)
	}
	if m := k.send(k.session(), "usage:100,10\nreply:operator"); textOf(m) != "operator" {
		t.Errorf("the operator's session: %q", textOf(m))
	}
	// Deleting the sessions gives nothing back.
	for _, id := range []string{first.ID, second.ID} {
		if code, _ := k.raw("DELETE", "/session/"+id, made.Token, ""); code != 200 {
			t.Fatalf("delete: %d", code)
		}
	}
	third, err := ci.CreateSession(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = ci.Send(ctx, third.ID, client.Prompt{Text: "reply:hi"})
	if st, err := ci.Wait(ctx, third.ID, "", time.Minute); err != nil || budgetError(t, st)["budget"] != "key" {
		t.Errorf("a new session after the spent ones were deleted: %+v, %v", st.Last, err)
	}
}

// TestRevokedKeyRefusedOnEveryNode: two nodes share a PostgreSQL
// database; a key revoked through one is refused by the other, and the
// streams it serves end, soon (by design within access.Staleness and
// Staleness plus half of it; the durations are logged). The verdict's bound
// is ten times Staleness: without the mechanism the key is served for as
// long as the node remembers it, and a loaded machine must not turn the
// design's figure into a failure.
func TestRevokedKeyRefusedOnEveryNode(t *testing.T) {
	t.Parallel()
	db := pgtest.Schema(t)
	withDB := func(c *app.Config) { c.DBPath = db }
	a := startKeyed(t, withDB)
	b := startKeyed(t, withDB)
	made, _ := a.key("bot", "own", nil)
	// b knows the key (and remembers it) before the revocation, and
	// serves it event streams of both dialects.
	if code, _ := b.raw("GET", "/session", made.Token, ""); code != 200 {
		t.Fatalf("the key on the other node: %d", code)
	}
	streams := []*sseReader{b.openStream("/event", made.Token), b.openStream("/api/event", made.Token)}
	if _, err := a.op.RevokeKey(t.Context(), made.ID); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	bound := 10 * access.Staleness
	for {
		code, _ := b.raw("GET", "/session", made.Token, "")
		if code == 401 {
			break
		}
		if code != 200 {
			t.Fatalf("the other node answered %d", code)
		}
		if time.Since(revoked) > bound {
			t.Fatalf("the other node still accepts the revoked key %v after", time.Since(revoked))
		}
	}
	t.Logf("refused on the other node %v after the revocation", time.Since(revoked).Round(time.Millisecond))
	// The streams it opened before end too.
	for _, s := range streams {
		s.drain()
		if time.Since(revoked) > bound {
			t.Errorf("a stream of the revoked key still open %v after", time.Since(revoked))
		}
	}
	t.Logf("streams ended on the other node %v after the revocation", time.Since(revoked).Round(time.Millisecond))
}

// TestKeyMayOnlyTightenBudget: the caps the operator puts on a key's
// session bind the key: it may lower them, not raise or lift them; it may
// cap a session that has none.
func TestKeyMayOnlyTightenBudget(t *testing.T) {
	t.Parallel()
	k := startKeyed(t)
	ctx := t.Context()
	_, bot := k.key("bot", "own", nil)
	sess, err := bot.CreateSession(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bot.SetSessionBudget(ctx, sess.ID, &client.Budget{Tokens: 500}); err != nil {
		t.Fatalf("a key caps its session: %v", err)
	}
	if _, err := k.op.SetSessionBudget(ctx, sess.ID, &client.Budget{Tokens: 100}); err != nil {
		t.Fatal(err)
	}
	for _, b := range []*client.Budget{{Tokens: 200}, {Cost: 5}, nil} {
		if _, err := bot.SetSessionBudget(ctx, sess.ID, b); !isStatus(err, 403) {
			t.Errorf("the key sets %+v over the operator's 100 tokens: %v, want 403", b, err)
		}
	}
	if _, err := bot.SetSessionBudget(ctx, sess.ID, &client.Budget{Tokens: 80, Cost: 1}); err != nil {
		t.Errorf("the key lowers the cap: %v", err)
	}
	if got, err := k.op.Session(ctx, sess.ID); err != nil || got.Budget == nil || got.Budget.Tokens != 80 {
		t.Errorf("the session's budget: %+v, %v", got.Budget, err)
	}
	if _, err := k.op.SetSessionBudget(ctx, sess.ID, nil); err != nil {
		t.Errorf("the operator lifts the caps: %v", err)
	}
}
