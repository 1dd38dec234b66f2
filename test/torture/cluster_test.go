package torture

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/fakellm"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/postgres"
	"github.com/agentd/agentd/internal/store/postgres/pgtest"
)

// TestClusterTorture is the crash torture test on three nodes sharing a
// PostgreSQL database: prompts, aborts, waits and status reads go to random
// nodes while random nodes are killed; the killed node's runs are taken
// over by the others (or by itself when it comes back first).
func TestClusterTorture(t *testing.T) {
	seconds := tortureSeconds(t)
	url := pgtest.Schema(t)
	runTorture(t, t.TempDir(), seconds, 3, url, func() store.Store {
		st, err := postgres.Open(context.Background(), url, postgres.Options{Node: "verifier"})
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}

// cluster is nodes agentd processes sharing one PostgreSQL schema, with
// fakellm as their provider and bash allowed.
type cluster struct {
	url     string
	dir     string // the parent of the workspace: tools write counters here
	srvs    []*server
	clients []*client.Client
	logPath string
}

// noSpuriousFencing fails the test when a node stopped a run because it
// believed its lease lost although nothing froze or cut it off, or when a
// run's kept transcript differed from the store's.
func (cl *cluster) noSpuriousFencing(t *testing.T) {
	t.Helper()
	b, _ := os.ReadFile(cl.logPath)
	for _, bad := range []string{"could not be renewed in time", "lease lost"} {
		if strings.Contains(string(b), bad) {
			t.Errorf("a node logged %q", bad)
		}
	}
	keptMatchesStore(t, cl.logPath)
}

func startCluster(t *testing.T, nodes int) *cluster {
	t.Helper()
	return startClusterOn(t, nodes, pgtest.Schema(t))
}

// startClusterOn starts the nodes on url; extra flags follow the defaults
// (a repeated flag's last value wins).
func startClusterOn(t *testing.T, nodes int, url string, extra ...string) *cluster {
	t.Helper()
	return startClusterWith(t, nodes, url, "", extra...)
}

// startClusterWith is startClusterOn with more top-level keys of
// agentd.json (config starts with a comma), then flags.
func startClusterWith(t *testing.T, nodes int, url, config string, flags ...string) *cluster {
	t.Helper()
	cl := &cluster{url: url, dir: t.TempDir()}
	ws := filepath.Join(cl.dir, "ws")
	os.MkdirAll(ws, 0o755)
	bin := agentdBinary(t)
	fake := fakellm.New(fakellm.Options{Second: 100 * time.Millisecond})
	hs := httptest.NewServer(fake.Handler())
	t.Cleanup(hs.Close)
	cfgPath := filepath.Join(cl.dir, "agentd.json")
	os.WriteFile(cfgPath, []byte(`{"model":"fake/fake-model","provider":{"fake":{"npm":"@ai-sdk/openai-compatible","options":{"baseURL":"`+hs.URL+`/v1"}}},
		"permission":{"bash":{"*":"allow","echo asked*":"ask"},"external_directory":"allow"}`+config+`}`), 0o644)
	cl.logPath = filepath.Join(cl.dir, "agentd.log")
	logFile, _ := os.Create(cl.logPath)
	t.Cleanup(func() {
		logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logFile.Name())
			t.Logf("nodes' log:\n%s", b)
		}
	})
	for i := range nodes {
		port := freePort(t)
		srv := &server{t: t, bin: bin, dir: ws, url: "http://127.0.0.1:" + strconv.Itoa(port), logFile: logFile,
			args: []string{"serve", "--port", strconv.Itoa(port), "--db", cl.url, "--config", cfgPath, "--log-level", "info",
				"--node", "node" + strconv.Itoa(i), "--lease-ttl", clusterTTL.String(), "--lease-renew", "500ms"}}
		srv.args = append(srv.args, flags...)
		srv.start()
		t.Cleanup(srv.stop)
		cl.srvs = append(cl.srvs, srv)
		cl.clients = append(cl.clients, client.New(srv.url))
	}
	return cl
}

// clusterTTL is the nodes' lease TTL in these tests.
const clusterTTL = 2 * time.Second

// leases returns how many run leases a node reports holding.
func leases(t *testing.T, url string) int {
	resp, err := http.Get(url + "/node")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var n struct{ Leases int }
	json.NewDecoder(resp.Body).Decode(&n)
	return n.Leases
}

// follow collects the seqs of the durable events a node streams, from the
// start of the log.
func follow(ctx context.Context, c *client.Client) func() []int64 {
	var mu sync.Mutex
	var seen []int64
	go func() {
		for ctx.Err() == nil {
			mu.Lock()
			cursor := int64(0)
			if len(seen) > 0 {
				cursor = seen[len(seen)-1]
			}
			mu.Unlock()
			_ = c.Events(ctx, "", cursor, true, func(ev client.Event) error {
				if ev.Seq > 0 {
					mu.Lock()
					seen = append(seen, ev.Seq)
					mu.Unlock()
				}
				return nil
			})
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return func() []int64 {
		mu.Lock()
		defer mu.Unlock()
		return append([]int64(nil), seen...)
	}
}

// TestClusterKillTakeover: kill -9 of the node that executes runs with tool
// calls in flight; the other nodes resume every one of them within the
// lease TTL + 5 s, each ends exactly once, no tool runs twice, status read
// from a surviving node is never idle meanwhile, and SSE followers on the
// surviving nodes see the whole log without a gap or a duplicate.
func TestClusterKillTakeover(t *testing.T) {
	cl := startCluster(t, 3)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	seenB, seenC := follow(ctx, cl.clients[1]), follow(ctx, cl.clients[2])
	a := cl.clients[0]
	var sids []string
	for i := range 4 {
		s, err := a.CreateSession(ctx, "", "")
		if err != nil {
			t.Fatal(err)
		}
		sids = append(sids, s.ID)
		tok := "tok" + strconv.Itoa(i)
		err = a.SendAsync(ctx, s.ID, client.Prompt{Text: `tool:bash:{"command":"echo ` + tok + ` >> counter.txt; sleep 30"}` + "\nreply:done " + tok})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Wait until node 0 runs the tools.
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(filepath.Join(cl.dir, "ws", "counter.txt"))
		if strings.Count(string(b), "tok") == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tools did not start: %q", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Several renewals go by: a node keeps what it renews.
	time.Sleep(2 * clusterTTL)
	owned := leases(t, cl.srvs[0].url)
	if owned < 1 {
		t.Fatalf("node 0 holds %d leases", owned)
	}
	cl.srvs[0].kill()
	killed := time.Now()
	// Status from a surviving node while the runs are taken over.
	b := cl.clients[1]
	for _, sid := range sids {
		for {
			st, err := b.Status(ctx, sid)
			if err != nil {
				t.Fatal(err)
			}
			if st.Type == core.StatusIdle {
				if st.Last == nil || st.Last.Outcome != core.RunSucceeded {
					t.Fatalf("session %s idle without success: %+v", sid, st)
				}
				break
			}
			if time.Since(killed) > clusterTTL+5*time.Second {
				t.Fatalf("session %s still %+v %s after the kill", sid, st, time.Since(killed))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Logf("node 0 held %d leases; every run ended %s after its kill", owned, time.Since(killed).Round(time.Millisecond))
	cl.noSpuriousFencing(t)
	// Each tool ran once; each tool call's outcome is unknown.
	data, _ := os.ReadFile(filepath.Join(cl.dir, "ws", "counter.txt"))
	for i := range 4 {
		if n := strings.Count(string(data), "tok"+strconv.Itoa(i)+"\n"); n != 1 {
			t.Errorf("tool tok%d ran %d times", i, n)
		}
	}
	for _, sid := range sids {
		msgs, err := b.Messages(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		text := mustJSON(msgs)
		if !strings.Contains(text, "outcome unknown") {
			t.Errorf("session %s: the cut-off tool call was not closed as outcome unknown", sid)
		}
	}
	st, err := postgres.Open(ctx, cl.url, postgres.Options{Node: "verifier"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// A run's end is in the runs table before its event has a place in
	// the log (the sequencer numbers committed events a pass later), so
	// idle sessions do not yet mean a complete log.
	var last int64
	var ends map[string]int
	for deadline := time.Now().Add(20 * time.Second); ; {
		_, last, _ = st.EventBounds(ctx)
		ends = map[string]int{}
		evs, _ := st.Events(ctx, store.EventQuery{Limit: 100000})
		for _, ev := range evs {
			if ev.Type == core.EventRunUpdated {
				var p core.RunProps
				json.Unmarshal(ev.Properties, &p)
				if core.TerminalState(p.Run.State) {
					ends[p.Run.ID]++
				}
			}
		}
		if len(ends) >= 4 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(ends) != 4 {
		t.Errorf("%d runs ended, want 4", len(ends))
	}
	for id, n := range ends {
		if n != 1 {
			t.Errorf("run %s ended %d times", id, n)
		}
	}
	for name, seen := range map[string]func() []int64{"node 1": seenB, "node 2": seenC} {
		deadline := time.Now().Add(10 * time.Second)
		var got []int64
		for {
			got = seen()
			if (len(got) > 0 && got[len(got)-1] >= last) || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		for i, s := range got {
			if s != int64(i+1) {
				t.Fatalf("%s's follower: event %d has seq %d (gap or duplicate)", name, i, s)
			}
		}
		// Events numbered after the verifier read the bounds may follow.
		if int64(len(got)) < last {
			t.Errorf("%s's follower saw %d of %d events", name, len(got), last)
		}
	}
}

// TestClusterZombieFenced: a node frozen (SIGSTOP) while its run's tool
// executes loses the run to another node; when it thaws it writes nothing
// more for that run and kills its tool processes.
func TestClusterZombieFenced(t *testing.T) {
	cl := startCluster(t, 2)
	ctx := t.Context()
	a, b := cl.clients[0], cl.clients[1]
	s, err := a.CreateSession(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	// The tool takes 10 s in small steps, then leaves a mark: the mark must
	// never appear, since the zombie's tool is killed when it thaws.
	err = a.SendAsync(ctx, s.ID, client.Prompt{Text: `tool:bash:{"command":"echo started >> zombie.txt; for i in $(seq 100); do sleep 0.1; done; echo ZOMBIE >> zombie.txt"}` + "\nreply:after the takeover"})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		data, _ := os.ReadFile(filepath.Join(cl.dir, "ws", "zombie.txt"))
		if strings.Contains(string(data), "started") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("tool did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := leases(t, cl.srvs[0].url); n != 1 {
		t.Fatalf("node 0 holds %d leases, want 1", n)
	}
	// The session's title is node 0's to write too, but it is not the
	// run's: written after a thaw it is a live node's write (conditional,
	// harmless). Let it land first, so that every write counted below is
	// the run's.
	for {
		sess, err := a.Session(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !core.IsDefaultTitle(sess.Title) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the session got no title")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cl.srvs[0].signal(syscall.SIGSTOP)
	stopped := time.Now()
	st := waitStatus(t, b, s.ID, func(st core.SessionStatus) bool { return st.Type == core.StatusIdle })
	if st.Last == nil || st.Last.Outcome != core.RunSucceeded {
		t.Fatalf("run taken over ended %+v", st.Last)
	}
	t.Logf("taken over and ended %s after the freeze", time.Since(stopped).Round(time.Millisecond))
	before, err := b.Messages(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	pg, err := postgres.Open(ctx, cl.url, postgres.Options{Node: "verifier"})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	_, lastBefore, _ := pg.EventBounds(ctx)
	cl.srvs[0].signal(syscall.SIGCONT)
	// Longer than the rest of the tool's 10 s.
	time.Sleep(11 * time.Second)
	data, _ := os.ReadFile(filepath.Join(cl.dir, "ws", "zombie.txt"))
	if strings.Contains(string(data), "ZOMBIE") {
		t.Error("the zombie's tool process was not stopped")
	}
	after, err := b.Messages(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if mustJSON(before) != mustJSON(after) {
		t.Errorf("the zombie changed the transcript after the takeover:\nbefore %s\nafter  %s", mustJSON(before), mustJSON(after))
	}
	// What the zombie's run would write: its messages, parts and end. The
	// taking node may still add the session's summary and status after
	// the run's end, and the sequencer numbers committed events a pass
	// later, so the log's head alone proves nothing.
	evs, _ := pg.Events(ctx, store.EventQuery{After: lastBefore, SessionID: s.ID})
	var late []core.Event
	for _, ev := range evs {
		if strings.HasPrefix(ev.Type, "message.") || ev.Type == core.EventRunUpdated || ev.Type == core.EventSessionError {
			late = append(late, ev)
		}
	}
	if len(late) > 0 {
		t.Errorf("%d run events written after the takeover: %s", len(late), mustJSON(late))
	}
	if n := leases(t, cl.srvs[0].url); n != 0 {
		t.Errorf("the zombie still holds %d leases", n)
	}
}

// privatePostgres starts a PostgreSQL server of the test's own (the shared
// one must not be restarted under other tests) and returns its URL and a
// function that restarts it.
func privatePostgres(t *testing.T) (string, func()) {
	t.Helper()
	pgtest.URL(t) // skips when the machine has no PostgreSQL for tests
	dir, err := os.MkdirTemp("", "agentd-pg-restart-")
	if err != nil {
		t.Fatal(err)
	}
	script, _ := filepath.Abs("../../scripts/postgres.sh")
	out, err := exec.Command(script, "start", dir, strconv.Itoa(freePort(t))).Output()
	if err != nil {
		t.Fatalf("start a private PostgreSQL: %v", err)
	}
	t.Cleanup(func() {
		exec.Command(script, "stop", dir).Run()
		os.RemoveAll(dir)
	})
	restart := func() {
		if out, err := exec.Command(script, "restart", dir).CombinedOutput(); err != nil {
			t.Fatalf("restart PostgreSQL: %v\n%s", err, out)
		}
	}
	return strings.TrimSpace(string(out)), restart
}

// TestClusterSurvivesPostgresRestart: PostgreSQL restarted (fast: every
// connection cut) while two nodes run turns with tools; the nodes
// reconnect, every acknowledged prompt is answered, every run succeeds
// and ends once.
func TestClusterSurvivesPostgresRestart(t *testing.T) {
	url, restart := privatePostgres(t)
	cl := startClusterOn(t, 2, url)
	ctx := t.Context()
	type sent struct{ sid, msgID string }
	var mu sync.Mutex
	var acc []sent
	var sids []string
	for range 4 {
		s, err := cl.clients[0].CreateSession(ctx, "", "")
		if err != nil {
			t.Fatal(err)
		}
		sids = append(sids, s.ID)
	}
	var wg sync.WaitGroup
	for i, sid := range sids {
		wg.Go(func() {
			for turn := range 4 {
				c := cl.clients[(i+turn)%2]
				text := "sleep:8\nreply:slow " + strconv.Itoa(turn)
				if turn%2 == 1 {
					text = `tool:bash:{"command":"sleep 0.5; echo t"}` + "\nreply:tool " + strconv.Itoa(turn)
				}
				p := client.Prompt{Text: text, MessageID: core.NewID(core.PrefixMessage, false), Busy: "queue"}
				deadline := time.Now().Add(60 * time.Second)
				for {
					err := c.SendAsync(ctx, sid, p)
					if err == nil {
						break
					}
					if time.Now().After(deadline) {
						t.Errorf("send never acknowledged: %v", err)
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
				mu.Lock()
				acc = append(acc, sent{sid, p.MessageID})
				mu.Unlock()
				for {
					st, err := c.Wait(ctx, sid, "", 5*time.Second)
					if err == nil && st.Type == core.StatusIdle {
						break
					}
					if time.Now().After(deadline) {
						t.Errorf("session %s never idle: %+v %v", sid, st, err)
						return
					}
					if err != nil {
						time.Sleep(100 * time.Millisecond)
					}
				}
			}
		})
	}
	time.Sleep(1500 * time.Millisecond)
	restart()
	t.Log("PostgreSQL restarted")
	wg.Wait()
	// A node stops its runs before its leases can expire; it never finds
	// one taken (a run that ended while a renewal was on its way is not a
	// lost lease either).
	if b, _ := os.ReadFile(cl.logPath); strings.Contains(string(b), "lease lost") {
		t.Error(`a node logged "lease lost"`)
	}
	pg, err := postgres.Open(ctx, url, postgres.Options{Node: "verifier"})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	for _, a := range acc {
		if _, err := pg.Message(ctx, a.sid, a.msgID); err != nil {
			t.Errorf("acknowledged prompt %s: %v", a.msgID, err)
		}
	}
	total := 0
	for _, sid := range sids {
		runs, err := pg.Runs(ctx, sid, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			total++
			if r.State != core.RunSucceeded {
				t.Errorf("run %s ended %s/%s: %+v", r.ID, r.State, r.Reason, r.Error)
			}
		}
	}
	if total != len(acc) {
		t.Errorf("%d runs for %d acknowledged prompts", total, len(acc))
	}
}

// owner returns the index of the one node that holds a run lease.
func (cl *cluster) owner(t *testing.T) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for i, srv := range cl.srvs {
			if leases(t, srv.url) == 1 {
				return i
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no node holds a run lease")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestClusterControlFromAnyNode: a client that talks to other nodes than
// the one executing its run is obeyed as if it talked to the owner: a
// reject busy policy refuses, an abort ends the run (its tool killed)
// before the answer, a permission asked on one node is answered on
// another, and a wait on a third node returns when the run ends.
func TestClusterControlFromAnyNode(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := t.Context()
	s, err := cl.clients[0].CreateSession(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(cl.dir, "ws", "sleeper.pid")
	err = cl.clients[0].SendAsync(ctx, s.ID, client.Prompt{Text: `tool:bash:{"command":"echo $$ > sleeper.pid; exec sleep 600"}` + "\nreply:never"})
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	deadline := time.Now().Add(20 * time.Second)
	for pid == 0 {
		b, _ := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		if time.Now().After(deadline) {
			t.Fatal("the tool did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	owner := cl.owner(t)
	other, third := cl.clients[(owner+1)%3], cl.clients[(owner+2)%3]
	err = other.SendAsync(ctx, s.ID, client.Prompt{Text: "reply:refused", Busy: "reject"})
	if err == nil || !strings.Contains(err.Error(), "409") {
		t.Errorf("reject policy through another node: %v, want 409", err)
	}
	if st, err := third.Status(ctx, s.ID); err != nil || st.Type != core.StatusBusy {
		t.Errorf("status on a third node = %+v, %v; want busy", st, err)
	}
	start := time.Now()
	if ok, err := other.Abort(ctx, s.ID); err != nil || !ok {
		t.Fatalf("abort through another node: %v %v", ok, err)
	}
	took := time.Since(start)
	// The answer came after the run's end.
	st, err := third.Status(ctx, s.ID)
	if err != nil || st.Type != core.StatusIdle || st.Last == nil || st.Last.Outcome != core.RunInterrupted || st.Last.Reason != core.ReasonAborted {
		t.Fatalf("status after the abort = %+v, %v; want idle, interrupted/aborted", st, err)
	}
	t.Logf("abort through another node answered after %s", took.Round(time.Millisecond))
	for syscall.Kill(pid, 0) == nil {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("the aborted run's tool (pid %d) still runs", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// A permission asked by the run, answered on another node.
	err = cl.clients[owner].SendAsync(ctx, s.ID, client.Prompt{Text: `tool:bash:{"command":"echo asked $((6*7))"}` + "\nreply:granted"})
	if err != nil {
		t.Fatal(err)
	}
	var req core.PermissionRequest
	for req.ID == "" {
		reqs, err := other.Permissions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range reqs {
			if r.SessionID == s.ID {
				req = r
			}
		}
		if time.Now().After(deadline.Add(20 * time.Second)) {
			t.Fatal("no permission request visible on another node")
		}
		time.Sleep(20 * time.Millisecond)
	}
	owner = cl.owner(t)
	other, third = cl.clients[(owner+1)%3], cl.clients[(owner+2)%3]
	if err := other.ReplyPermission(ctx, req.ID, "once", ""); err != nil {
		t.Fatal(err)
	}
	st, err = third.Wait(ctx, s.ID, "", 20*time.Second)
	if err != nil || st.Type != core.StatusIdle || st.Last == nil || st.Last.Outcome != core.RunSucceeded {
		t.Fatalf("wait on a third node = %+v, %v; want idle after success", st, err)
	}
	msgs, err := third.Messages(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	// The output, not the command: the call ran.
	if text := mustJSON(msgs); !strings.Contains(text, "asked 42") || !strings.Contains(text, "granted") {
		t.Errorf("the permitted tool call's output or the answer is missing from the transcript")
	}
	cl.noSpuriousFencing(t)
}

// TestClusterKillTakeoverBeforeTTL: with a lease TTL of a minute, the run
// of a node killed with -9 is taken over as soon as the node's connection
// to the database is gone, not when its lease expires; GET /node lists the
// cluster's nodes, and the dead one leaves the list.
func TestClusterKillTakeoverBeforeTTL(t *testing.T) {
	const ttl = time.Minute
	cl := startClusterOn(t, 2, pgtest.Schema(t), "--lease-ttl", ttl.String(), "--lease-renew", "5s")
	started := time.Now()
	ctx := t.Context()
	if got := clusterNodes(t, cl.srvs[1].url); len(got) != 2 {
		t.Fatalf("node 1 lists the cluster as %v", got)
	}
	a := cl.clients[0]
	s, err := a.CreateSession(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	err = a.SendAsync(ctx, s.ID, client.Prompt{Text: `tool:bash:{"command":"echo started >> counter.txt; sleep 120"}` + "\nreply:done"})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(filepath.Join(cl.dir, "ws", "counter.txt"))
		if strings.Contains(string(b), "started") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the tool did not start")
		}
	}
	if leases(t, cl.srvs[0].url) != 1 {
		t.Fatal("node 0 does not hold the run")
	}
	// A node judges others only once its own presence has been visible
	// for its grace (10 s).
	time.Sleep(time.Until(started.Add(10 * time.Second)))
	cl.srvs[0].kill()
	killed := time.Now()
	b := cl.clients[1]
	for {
		st, err := b.Status(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		if st.Type == core.StatusIdle {
			if st.Last == nil || st.Last.Outcome != core.RunSucceeded {
				t.Fatalf("idle without success: %+v", st)
			}
			break
		}
		if time.Since(killed) > ttl/2 {
			t.Fatalf("still %+v %s after the kill: the run waited for the lease to expire", st, time.Since(killed))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("the run ended %s after its node's kill (lease TTL %s)", time.Since(killed).Round(time.Millisecond), ttl)
	if got := clusterNodes(t, cl.srvs[1].url); len(got) != 1 || got[0] != "node1" {
		t.Errorf("after the kill node 1 lists the cluster as %v", got)
	}
}

// clusterNodes returns the ids of the nodes a node's GET /node lists.
func clusterNodes(t *testing.T, url string) []string {
	t.Helper()
	resp, err := http.Get(url + "/node")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var n struct{ Cluster []struct{ ID string } }
	if err := json.NewDecoder(resp.Body).Decode(&n); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range n.Cluster {
		ids = append(ids, c.ID)
	}
	return ids
}
