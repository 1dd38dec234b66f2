package app_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/schedule"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/postgres/pgtest"
)

// testClock is the time the nodes of a test judge ticks by; it moves
// only when the test says.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func withClock(clk *testClock) option {
	return func(c *app.Config) { c.Schedules = schedule.Config{Now: clk.Now, Poll: 10 * time.Millisecond} }
}

// httpJSON sends a request and decodes a 200 answer into out.
func httpJSON(t *testing.T, method, url, body string, out any) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %v %s", method, url, err, data)
		}
	}
}

// waitTick waits until the schedule's last tick is tick and its run has
// ended, and returns that record.
func waitTick(t *testing.T, base, id string, tick int64) *schedule.Tick {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var v schedule.Schedule
		httpJSON(t, "GET", base+"/schedule/"+id, "", &v)
		if l := v.Last; l != nil && l.Tick == tick && (l.Skipped != "" || l.Error != "" || l.Run != nil && l.Run.State.Terminal()) {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("schedule %s: tick %d not done: %+v", id, tick, v.Last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestScheduleFiresOncePerTickOnThreeNodes: three nodes share a
// PostgreSQL database and a clock; each runs its scheduler, and at every
// tick the test also makes all three look for due ticks at once. Each
// tick of a schedule into a session starts exactly one run, and each tick
// of a schedule that makes a session per tick makes exactly one session
// with one run; a downtime of many ticks fires once.
func TestScheduleFiresOncePerTickOnThreeNodes(t *testing.T) {
	t.Parallel()
	db := pgtest.Schema(t)
	clk := &testClock{now: time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)}
	var nodes []*node
	for i := range 3 {
		nodes = append(nodes, startNode(t, withClock(clk), func(c *app.Config) { c.DBPath, c.Node = db, fmt.Sprintf("n%d", i+1) }))
	}
	sid := nodes[0].session()
	var into, fresh schedule.Schedule
	httpJSON(t, "POST", nodes[1].app.URL()+"/schedule", `{"every":"1m","prompt":"reply:tick","sessionID":"`+sid+`"}`, &into)
	httpJSON(t, "POST", nodes[2].app.URL()+"/schedule", `{"name":"fresh","cron":"* * * * *","prompt":"reply:fresh","newSession":true}`, &fresh)

	allDue := func() {
		var wg sync.WaitGroup
		for _, n := range nodes {
			wg.Go(func() {
				if _, err := n.app.Schedules.RunDue(t.Context()); err != nil {
					t.Errorf("run due: %v", err)
				}
			})
		}
		wg.Wait()
	}
	const ticks = 4
	for k := 1; k <= ticks+1; k++ {
		step := time.Minute
		if k == ticks+1 {
			step = 10 * time.Minute // a downtime: nine ticks missed
		}
		clk.Add(step)
		allDue()
		tick := clk.Now().Truncate(time.Minute).UnixMilli()
		if k == ticks+1 {
			tick = clk.Now().Add(-9 * time.Minute).UnixMilli()
		}
		last := waitTick(t, nodes[k%3].app.URL(), into.ID, tick)
		if last.Run.State != core.RunSucceeded {
			t.Errorf("tick %d: %+v", k, last.Run)
		}
		waitTick(t, nodes[(k+1)%3].app.URL(), fresh.ID, tick)
		allDue()
		if runs, _ := nodes[k%3].c.Runs(t.Context(), sid); len(runs) != k {
			t.Fatalf("after tick %d the session has %d runs", k, len(runs))
		}
		if n := scheduledSessions(t, nodes[0].c); n != k {
			t.Fatalf("after tick %d there are %d sessions of the schedule", k, n)
		}
		if k == ticks+1 && last.Missed != 9 {
			t.Errorf("downtime: missed %d, want 9", last.Missed)
		}
	}
	var list []schedule.Schedule
	httpJSON(t, "GET", nodes[0].app.URL()+"/schedule", "", &list)
	if len(list) != 2 || list[0].ID != into.ID || list[0].Next != clk.Now().Truncate(time.Minute).Add(time.Minute).UnixMilli() {
		t.Errorf("list: %+v", list)
	}
}

// scheduledSessions counts the sessions a schedule made, checking that
// each has one run.
func scheduledSessions(t *testing.T, c *client.Client) int {
	t.Helper()
	list, err := c.Sessions(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range list {
		if s.Title != "Scheduled: fresh" {
			continue
		}
		n++
		if runs, _ := c.Runs(t.Context(), s.ID); len(runs) != 1 {
			t.Errorf("session %s of the schedule has %d runs", s.ID, len(runs))
		}
	}
	return n
}

// TestScheduleSkipsBusySession: a tick that finds its session still
// running sends nothing and says so; the tick after the run ended sends
// as usual; a deleted schedule fires no more.
func TestScheduleSkipsBusySession(t *testing.T) {
	t.Parallel()
	clk := &testClock{now: time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)}
	n := startNode(t, withClock(clk))
	sid := n.session()
	if err := n.c.SendAsync(t.Context(), sid, client.Prompt{Text: "tool:block:{}"}); err != nil {
		t.Fatal(err)
	}
	n.waitToolRunning(sid)
	var sc schedule.Schedule
	httpJSON(t, "POST", n.app.URL()+"/schedule", `{"every":"1h","prompt":"reply:hourly","sessionID":"`+sid+`"}`, &sc)
	clk.Add(time.Hour)
	last := waitTick(t, n.app.URL(), sc.ID, sc.Next)
	if last.Skipped != "busy" || last.RunID != "" {
		t.Fatalf("tick on a busy session: %+v", last)
	}
	if _, err := n.c.Abort(t.Context(), sid); err != nil {
		t.Fatal(err)
	}
	n.waitIdle(sid)
	clk.Add(time.Hour)
	last = waitTick(t, n.app.URL(), sc.ID, sc.Next+time.Hour.Milliseconds())
	if last.Skipped != "" || last.Run == nil || last.Run.State != core.RunSucceeded {
		t.Fatalf("tick on an idle session: %+v", last)
	}
	msgs, _ := n.c.Messages(t.Context(), sid)
	if got := textOf(msgs[len(msgs)-1]); !strings.Contains(got, "hourly") {
		t.Errorf("the scheduled prompt's answer: %q", got)
	}
	httpJSON(t, "DELETE", n.app.URL()+"/schedule/"+sc.ID, "", nil)
	runs, _ := n.c.Runs(t.Context(), sid)
	clk.Add(time.Hour)
	if _, err := n.app.Schedules.RunDue(t.Context()); err != nil {
		t.Fatal(err)
	}
	if after, _ := n.c.Runs(t.Context(), sid); len(after) != len(runs) {
		t.Errorf("a deleted schedule fired: %d runs, then %d", len(runs), len(after))
	}
}

// TestScheduleTickLeftByDeadNodeSentOnce: a node that claimed a tick,
// admitted its prompt and died before recording it (what kill -9 at that
// moment leaves) does not make the tick send twice: once the claim has
// lapsed the tick is taken over and sent with the same message id, which
// the engine admits once; the schedule records the run that answered it.
func TestScheduleTickLeftByDeadNodeSentOnce(t *testing.T) {
	t.Parallel()
	clk := &testClock{now: time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)}
	// The loop looks once at start; the test makes the passes.
	n := startNode(t, func(c *app.Config) { c.Schedules = schedule.Config{Now: clk.Now, Poll: time.Hour} })
	sid := n.session()
	var sc schedule.Schedule
	httpJSON(t, "POST", n.app.URL()+"/schedule", `{"every":"1h","prompt":"reply:hourly","sessionID":"`+sid+`"}`, &sc)
	clk.Add(time.Hour)
	// The dead node's claim and admission.
	msg := core.NewID(core.PrefixMessage, false)
	pending := fmt.Sprintf(`{"tick":%d,"sessionID":%q,"messageID":%q}`, sc.Next, sid, msg)
	claimed := clk.Now().Add(time.Minute).UnixMilli()
	err := n.app.Store.Tx(t.Context(), func(tx store.Tx) error {
		return tx.ClaimTick(t.Context(), sc.ID, sc.Next, sc.Next+time.Hour.Milliseconds(), []byte(pending), claimed)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.c.SendAsync(t.Context(), sid, client.Prompt{Text: "reply:hourly", MessageID: msg}); err != nil {
		t.Fatal(err)
	}
	n.waitIdle(sid)
	if fired, err := n.app.Schedules.RunDue(t.Context()); fired != 0 || err != nil {
		t.Fatalf("fired %d (%v) while the dead node's claim held", fired, err)
	}
	clk.Add(2 * time.Minute)
	if fired, err := n.app.Schedules.RunDue(t.Context()); fired != 1 || err != nil {
		t.Fatalf("took the tick over %d times (%v)", fired, err)
	}
	last := waitTick(t, n.app.URL(), sc.ID, sc.Next)
	runs, _ := n.c.Runs(t.Context(), sid)
	if len(runs) != 1 || last.RunID != runs[0].ID || last.MessageID != msg || last.Run.State != core.RunSucceeded {
		t.Errorf("after the takeover: %d runs, last %+v", len(runs), last)
	}
	msgs, _ := n.c.Messages(t.Context(), sid)
	users := 0
	for _, m := range msgs {
		if m.Info.Role == core.RoleUser {
			users++
		}
	}
	if users != 1 {
		t.Errorf("%d user messages for one tick", users)
	}
}

// TestSchedulesAreTheOperators: a schedule sends prompts with nobody's
// key, into any session: API keys may not make, list or remove them.
func TestSchedulesAreTheOperators(t *testing.T) {
	t.Parallel()
	k := startKeyed(t)
	made, ci := k.key("ci", "own", nil)
	sess, err := ci.CreateSession(t.Context(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	body := `{"every":"1h","prompt":"p","sessionID":"` + sess.ID + `"}`
	for _, rt := range [][3]string{{"POST", "/schedule", body}, {"GET", "/schedule", ""}, {"GET", "/schedule/sch_x", ""}, {"DELETE", "/schedule/sch_x", ""}} {
		if code, out := k.raw(rt[0], rt[1], made.Token, rt[2]); code != http.StatusForbidden {
			t.Errorf("%s %s with a key: %d %s, want 403", rt[0], rt[1], code, out)
		}
	}
	if code, out := k.raw("POST", "/schedule", "", body); code != http.StatusOK {
		t.Errorf("the operator's schedule: %d %s", code, out)
	}
}
