package torture

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/pause"
	"github.com/agentd/agentd/internal/store/postgres/pgtest"
)

// TestClusterKillPaused: on PostgreSQL, a session set to resume "paused"
// whose node is killed (-9) mid tool call is taken over by another node
// and held there — busy, phase paused, with the session's reason —
// until POST /session/{id}/resume on that node, after which it completes;
// another held beside it ends interrupted (aborted) on an abort.
// A session without the setting, cut off beside it on a cluster that is
// not paused, is resumed by the other node on its own as before.
func TestClusterKillPaused(t *testing.T) {
	cl := startClusterOn(t, 2, pgtest.Schema(t))
	ctx := t.Context()
	a, b := cl.clients[0], cl.clients[1]
	call := func(url, method, path, body string) (int, string) {
		t.Helper()
		return callAPI(t, method, url+path, body)
	}
	var sids []string
	for range 3 {
		s, err := a.CreateSession(ctx, "", "")
		if err != nil {
			t.Fatal(err)
		}
		sids = append(sids, s.ID)
	}
	held, free, aborted := sids[0], sids[1], sids[2]
	for _, sid := range []string{held, aborted} {
		if code, body := call(cl.srvs[0].url, "PATCH", "/session/"+sid, `{"resume":"paused"}`); code != 200 {
			t.Fatalf("PATCH resume paused: %d %s", code, body)
		}
	}
	for i, sid := range sids {
		tool := `tool:bash:{"command":"echo started` + string(rune('0'+i)) + ` >> counter.txt; sleep 120"}`
		if err := a.SendAsync(ctx, sid, client.Prompt{Text: tool + "\nreply:done"}); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got, _ := os.ReadFile(filepath.Join(cl.dir, "ws", "counter.txt"))
		if strings.Count(string(got), "started") == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the tools did not start")
		}
	}
	if n := leases(t, cl.srvs[0].url); n != 3 {
		t.Fatalf("node 0 holds %d runs, want all 3", n)
	}
	cl.srvs[0].kill()

	st, err := b.Wait(ctx, free, "", time.Minute)
	if err != nil || st.Last == nil || st.Last.Outcome != core.RunSucceeded {
		t.Fatalf("the session without the setting after the kill: %+v %v", st, err)
	}
	st = waitStatus(t, b, held, func(st core.SessionStatus) bool { return st.Phase == core.PhasePaused })
	if st.Type != core.StatusBusy || st.Message != pause.SessionReason {
		t.Fatalf("held session's status on node 1: %+v", st)
	}
	msgs, err := b.Messages(ctx, held)
	if err != nil {
		t.Fatal(err)
	}
	// Held, not executing: node 1 claimed it and let it go, and it stays
	// paused through a few of node 1's claim polls.
	time.Sleep(2 * clusterTTL) // a window for a wrong resumption to show; not a synchronisation
	if st, err := b.Status(ctx, held); err != nil || st.Phase != core.PhasePaused {
		t.Fatalf("held session's status later: %+v %v", st, err)
	}
	if n := leases(t, cl.srvs[1].url); n != 0 {
		t.Errorf("node 1 holds %d leases while the run is paused", n)
	}
	waitStatus(t, b, aborted, func(st core.SessionStatus) bool { return st.Phase == core.PhasePaused })
	if code, body := call(cl.srvs[1].url, "POST", "/session/"+aborted+"/abort", ""); code != 200 {
		t.Fatalf("abort on node 1: %d %s", code, body)
	}
	if st, err := b.Status(ctx, aborted); err != nil || st.Type != core.StatusIdle || st.Last == nil || st.Last.Reason != core.ReasonAborted {
		t.Errorf("the held session aborted: %+v %v", st, err)
	}
	if code, body := call(cl.srvs[1].url, "POST", "/session/"+held+"/resume", ""); code != 200 {
		t.Fatalf("resume on node 1: %d %s", code, body)
	}
	st, err = b.Wait(ctx, held, "", time.Minute)
	if err != nil || st.Last == nil || st.Last.Outcome != core.RunSucceeded {
		t.Fatalf("the resumed session: %+v %v", st, err)
	}
	after, err := b.Messages(ctx, held)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) <= len(msgs) || !strings.Contains(textOfParts(after[len(after)-1].Parts), "done") {
		t.Errorf("the resumed run did not answer: %d messages, %d while held", len(after), len(msgs))
	}
	cl.noSpuriousFencing(t)
}
