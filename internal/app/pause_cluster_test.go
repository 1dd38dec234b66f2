package app_test

import (
	"testing"
	"time"

	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/pause"
	"github.com/agentd/agentd/internal/store/postgres/pgtest"
)

// TestClusterStopPaused: on PostgreSQL, node a shuts down with two runs
// cut off mid-stream; node b takes them over. The session set to resume
// paused is held on b (busy, phase paused, the session's reason) until
// POST /session/{id}/resume on b, after which it completes; the other, on
// a cluster that is not paused, resumes on b on its own. (A node killed
// with -9 is test/torture's TestClusterKillPaused.)
func TestClusterStopPaused(t *testing.T) {
	t.Parallel()
	db := pgtest.Schema(t)
	on := func(name string) func(*app.Config) {
		return func(c *app.Config) { c.DBPath, c.Node = db, name }
	}
	a, b := startNode(t, on("a")), startNode(t, on("b"))
	held, free := a.session(), a.session()
	if code, body := a.raw("PATCH", "/session/"+held, `{"resume":"paused"}`); code != 200 {
		t.Fatalf("PATCH resume paused: %d %s", code, body)
	}
	a.startLong(held)
	a.startLong(free)
	a.stop()

	if st := b.waitIdle(free); st.Last == nil || st.Last.Outcome != core.RunSucceeded {
		t.Fatalf("the session without the setting ended %+v", st.Last)
	}
	var st core.SessionStatus
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if st = b.status(held); st.Phase == core.PhasePaused {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("held session's status on b = %+v", st)
		}
	}
	if st.Type != core.StatusBusy || st.Message != pause.SessionReason {
		t.Fatalf("held session's status on b = %+v", st)
	}
	if code, body := b.raw("POST", "/session/"+held+"/resume", ""); code != 200 {
		t.Fatalf("resume on b: %d %s", code, body)
	}
	if st := b.waitIdle(held); st.Last == nil || st.Last.Outcome != core.RunSucceeded {
		t.Fatalf("the resumed session ended %+v", st.Last)
	}
}
