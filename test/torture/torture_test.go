// Package torture holds the crash torture test: the real agentd binary,
// fakellm as its provider, many sessions, and SIGKILL at random moments.
// It runs when AGENTD_TORTURE=1 (CI sets it); AGENTD_TORTURE_SECONDS and
// AGENTD_TORTURE_SEED tune it.
package torture

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
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
	"github.com/agentd/agentd/internal/store/sqlite"
	"github.com/agentd/agentd/internal/testenv"
)

type server struct {
	t       *testing.T
	bin     string
	args    []string
	dir     string
	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has been waited for
	url     string
	kills   int
	logFile *os.File
}

func (s *server) start() {
	s.t.Helper()
	cmd := exec.Command(s.bin, s.args...)
	cmd.Dir = s.dir
	cmd.Stderr = s.logFile
	// Each step compares the transcript its run keeps with the store's
	// (engine.Config.CheckHistory); keptMatchesStore reads the verdict.
	// agentd's configuration directory is the test's, not the user's: a
	// node on PostgreSQL imports the credential file it finds there and
	// sets it aside.
	cmd.Env = append(os.Environ(), "AGENTD_CHECK_HISTORY=1", "XDG_CONFIG_HOME="+s.t.TempDir())
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	c := client.New(s.url)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.Health(ctx)
		cancel()
		if err == nil {
			break
		}
		select {
		case <-exited:
			s.t.Fatalf("agentd exited at start (%v); its log ends:\n%s", cmd.ProcessState, s.logTail())
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("agentd did not come up: %v; its log ends:\n%s", err, s.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
}

// logTail is the end of the servers' log.
func (s *server) logTail() string {
	b, _ := os.ReadFile(s.logFile.Name())
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

func (s *server) kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
	s.kills++
}

func (s *server) signal(sig os.Signal) {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	_ = cmd.Process.Signal(sig)
}

func (s *server) stop() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	<-exited
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

type accepted struct {
	sessionID, messageID, token string
}

type sample struct {
	sessionID string
	t0, t1    int64
	status    core.SessionStatus
}

func TestTorture(t *testing.T) {
	seconds := tortureSeconds(t)
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "agentd.db")
	runTorture(t, dir, seconds, 1, dbPath, func() store.Store {
		st, err := sqlite.Open(context.Background(), dbPath, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}

// tortureSeconds skips unless AGENTD_TORTURE=1 and returns the test's length.
func tortureSeconds(t *testing.T) int {
	if os.Getenv("AGENTD_TORTURE") != "1" {
		testenv.Skip(t, testenv.Torture, "the crash torture test runs on request")
	}
	seconds := 60
	if v, err := strconv.Atoi(os.Getenv("AGENTD_TORTURE_SECONDS")); err == nil && v > 0 {
		seconds = v
	}
	return seconds
}

// runTorture drives nodes agentd processes sharing the database db with
// prompts of every kind sent to random nodes, kills a random node with
// SIGKILL at random moments and restarts it, follows /event on every node
// across its restarts, samples status from random nodes, and then checks
// the promises against the database opened by open.
func runTorture(t *testing.T, dir string, seconds, nodes int, db string, open func() store.Store) {
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("AGENTD_TORTURE_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("seed %d, %d s, %d nodes", seed, seconds, nodes)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var rngMu sync.Mutex
	randN := func(n int) int { rngMu.Lock(); defer rngMu.Unlock(); return rng.IntN(n) }

	ws := filepath.Join(dir, "ws")
	os.MkdirAll(ws, 0o755)
	bin := agentdBinary(t)
	fake := fakellm.New(fakellm.Options{Second: 200 * time.Millisecond})
	hs := httptest.NewServer(fake.Handler())
	defer hs.Close()
	cfgPath := filepath.Join(dir, "agentd.json")
	os.WriteFile(cfgPath, []byte(`{"model":"fake/fake-model","provider":{"fake":{"npm":"@ai-sdk/openai-compatible","options":{"baseURL":"`+hs.URL+`/v1"}}},
		"permission":{"bash":"allow","external_directory":"allow"},"agentd":{"retry":{"maxAttempts":4}}}`), 0o644)
	logFile, _ := os.Create(filepath.Join(dir, "agentd.log"))
	defer logFile.Close()
	var srvs []*server
	var clients []*client.Client
	for range nodes {
		port := freePort(t)
		args := []string{"serve", "--port", strconv.Itoa(port), "--db", db, "--config", cfgPath, "--log-level", "warn"}
		if nodes > 1 {
			args = append(args, "--lease-ttl", "2s", "--lease-renew", "500ms")
		}
		srv := &server{t: t, bin: bin, dir: ws, url: "http://127.0.0.1:" + strconv.Itoa(port), logFile: logFile, args: args}
		srv.start()
		c := client.New(srv.url)
		c.HTTP = &http.Client{Timeout: 10 * time.Second}
		srvs, clients = append(srvs, srv), append(clients, c)
	}
	anyNode := func() *client.Client { return clients[randN(len(clients))] }

	ctx, stopAll := context.WithCancel(context.Background())
	defer stopAll()
	deadline := time.Now().Add(time.Duration(seconds) * time.Second)

	// SSE consumers: one per node, each following its node across every
	// restart.
	type consumer struct {
		mu   sync.Mutex
		seen []int64
		// at is when each event of seen arrived (ms): it was committed
		// by then.
		at     []int64
		cursor int64
	}
	consumers := make([]*consumer, nodes)
	var consumersWG sync.WaitGroup
	for i, srv := range srvs {
		cs := &consumer{}
		consumers[i] = cs
		consumersWG.Go(func() {
			sc := client.New(srv.url)
			for ctx.Err() == nil {
				cs.mu.Lock()
				cursor := cs.cursor
				cs.mu.Unlock()
				_ = sc.Events(ctx, "", cursor, true, func(ev client.Event) error {
					if ev.Seq > 0 {
						cs.mu.Lock()
						cs.seen = append(cs.seen, ev.Seq)
						cs.at = append(cs.at, time.Now().UnixMilli())
						cs.cursor = ev.Seq
						cs.mu.Unlock()
					}
					return nil
				})
				select {
				case <-ctx.Done():
				case <-time.After(20 * time.Millisecond):
				}
			}
		})
	}

	// Drivers.
	const sessions = 12
	var accMu sync.Mutex
	var acc []accepted
	var sids []string
	for range sessions {
		s, err := anyNode().CreateSession(ctx, "", "")
		if err != nil {
			t.Fatal(err)
		}
		sids = append(sids, s.ID)
	}
	var wg sync.WaitGroup
	driveCtx, stopDrive := context.WithDeadline(ctx, deadline)
	defer stopDrive()
	for _, sid := range sids {
		wg.Go(func() {
			for driveCtx.Err() == nil {
				token := core.NewID("tok", false)
				var text string
				switch randN(6) {
				case 0:
					text = "reply:plain answer " + token
				case 1:
					text = "sleep:" + strconv.Itoa(2+randN(6)) + "\nreply:slow " + token
				case 2, 3:
					text = `tool:bash:{"command":"echo ` + token + ` >> counter.txt; sleep 0.` + strconv.Itoa(randN(9)) + `"}` + "\nreply:counted"
				case 4:
					text = "fail:503x1\nreply:after retry " + token
				case 5:
					text = "sleep:20\nreply:to be aborted"
				}
				msgID := core.NewID(core.PrefixMessage, false)
				p := client.Prompt{Text: text, MessageID: msgID, Busy: "queue"}
				// Retry the send until it is acknowledged; the message id
				// makes repeats harmless.
				for driveCtx.Err() == nil {
					if err := anyNode().SendAsync(driveCtx, sid, p); err == nil {
						accMu.Lock()
						acc = append(acc, accepted{sid, msgID, token})
						accMu.Unlock()
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
				if strings.HasPrefix(text, "sleep:20") {
					time.Sleep(time.Duration(200+randN(800)) * time.Millisecond)
					_, _ = anyNode().Abort(driveCtx, sid)
				}
				for driveCtx.Err() == nil {
					st, err := anyNode().Wait(driveCtx, sid, "", 5*time.Second)
					if err == nil && st.Type == core.StatusIdle {
						break
					}
					if err != nil {
						time.Sleep(50 * time.Millisecond)
					}
				}
			}
		})
	}

	// Poller.
	var samplesMu sync.Mutex
	var samples []sample
	wg.Go(func() {
		for driveCtx.Err() == nil {
			sid := sids[randN(len(sids))]
			t0 := time.Now().UnixMilli()
			st, err := anyNode().Status(driveCtx, sid)
			t1 := time.Now().UnixMilli()
			if err == nil {
				samplesMu.Lock()
				samples = append(samples, sample{sid, t0, t1, st})
				samplesMu.Unlock()
			}
			time.Sleep(5 * time.Millisecond)
		}
	})

	// Killer: one node at a time; on a cluster the others take its runs
	// over while it is down.
	kills := 0
	for time.Now().Before(deadline.Add(-2 * time.Second)) {
		time.Sleep(time.Duration(700+randN(2300)) * time.Millisecond)
		srv := srvs[randN(len(srvs))]
		srv.kill()
		kills++
		if nodes > 1 && randN(2) == 0 {
			time.Sleep(time.Duration(500+randN(2500)) * time.Millisecond)
		}
		srv.start()
	}
	stopDrive()
	wg.Wait()

	// Let every accepted prompt finish, then stop cleanly.
	for _, sid := range sids {
		for {
			st, err := clients[0].Wait(ctx, sid, "", 60*time.Second)
			if err == nil && st.Type == core.StatusIdle {
				break
			}
			if err != nil && ctx.Err() != nil {
				t.Fatal(err)
			}
		}
	}
	// Give the consumers the tail of the log.
	st := open()
	_, lastSeq, _ := st.EventBounds(ctx)
	for i, cs := range consumers {
		for n := 0; ; n++ {
			cs.mu.Lock()
			cur := cs.cursor
			cs.mu.Unlock()
			if cur >= lastSeq {
				break
			}
			if n > 1000 {
				t.Fatalf("consumer of node %d stuck at %d of %d", i, cur, lastSeq)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	stopAll()
	consumersWG.Wait()
	for _, srv := range srvs {
		srv.stop()
	}
	st.Close()
	st = open()
	defer st.Close()
	var seen [][]int64
	arrived := map[int64]int64{} // seq → when a consumer first had it
	for _, cs := range consumers {
		seen = append(seen, cs.seen)
		for i, seq := range cs.seen {
			if at, ok := arrived[seq]; !ok || cs.at[i] < at {
				arrived[seq] = cs.at[i]
			}
		}
	}
	verify(t, st, acc, samples, seen, arrived, filepath.Join(ws, "counter.txt"), kills)
	keptMatchesStore(t, logFile.Name())
}

// keptMatchesStore fails the test when a run found the transcript it kept
// from its own writes different from the store's, through crashes and
// restarts (the check fails the run and logs it).
func keptMatchesStore(t *testing.T, logPath string) {
	t.Helper()
	b, _ := os.ReadFile(logPath)
	if i := strings.Index(string(b), "differs from the store"); i >= 0 {
		t.Errorf("a run's kept transcript differed from the store: %s", b[max(0, i-300):min(len(b), i+300)])
	}
}

func verify(t *testing.T, st store.Store, acc []accepted, samples []sample, seen [][]int64, arrived map[int64]int64, counterPath string, kills int) {
	ctx := context.Background()
	var lost, dupRuns, badEnds int
	runsBySession := map[string][]core.Run{}
	for _, a := range acc {
		if _, ok := runsBySession[a.sessionID]; !ok {
			runs, err := st.Runs(ctx, a.sessionID, 0)
			if err != nil {
				t.Fatal(err)
			}
			runsBySession[a.sessionID] = runs
		}
		if _, err := st.Message(ctx, a.sessionID, a.messageID); errors.Is(err, store.ErrNotFound) {
			lost++
			t.Errorf("accepted prompt %s is not in the transcript", a.messageID)
			continue
		}
		n := 0
		for _, r := range runsBySession[a.sessionID] {
			if r.UserMessageID == a.messageID {
				n++
				if !core.TerminalState(r.State) {
					badEnds++
					t.Errorf("run %s never ended: %s", r.ID, r.State)
				}
			}
		}
		if n != 1 {
			dupRuns++
			t.Errorf("prompt %s has %d runs", a.messageID, n)
		}
	}

	// One end per run in the log; seq dense.
	type tally struct{ terminal, idleParts, idleEvents int }
	tallies := map[string]*tally{}
	get := func(id string) *tally {
		if tallies[id] == nil {
			tallies[id] = &tally{}
		}
		return tallies[id]
	}
	var all []core.Event
	for after := int64(0); ; {
		evs, err := st.Events(ctx, store.EventQuery{After: after, Limit: 5000})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, evs...)
		if len(evs) < 5000 {
			break
		}
		after = evs[len(evs)-1].Seq
	}
	resumes := 0
	current := map[string]string{} // session → its latest run in the log
	admitted := map[string]int64{} // run → the seq of its first event
	for i, ev := range all {
		if ev.Seq != int64(i+1) {
			t.Fatalf("seq hole: event %d has seq %d", i, ev.Seq)
		}
		switch ev.Type {
		case core.EventRunUpdated:
			var p core.RunProps
			json.Unmarshal(ev.Properties, &p)
			current[p.Run.SessionID] = p.Run.ID
			if _, ok := admitted[p.Run.ID]; !ok {
				admitted[p.Run.ID] = ev.Seq
			}
			if core.TerminalState(p.Run.State) {
				get(p.Run.ID).terminal++
			}
			if p.Run.Phase == core.PhaseRecovering {
				resumes++
			}
		case core.EventPartUpdated:
			var p struct{ Part core.Part }
			json.Unmarshal(ev.Properties, &p)
			if p.Part.Type == core.PartIdle {
				get(p.Part.RunID).idleParts++
			}
		case core.EventSessionIdle:
			// session.idle carries no run id; it follows the end of the
			// session's latest run in the same transaction.
			get(current[ev.SessionID]).idleEvents++
		}
	}
	duplicates := 0
	for id, tl := range tallies {
		if tl.terminal != 1 || tl.idleParts != 1 || tl.idleEvents > 1 {
			duplicates++
			t.Errorf("run %s: %d terminal updates, %d idle parts, %d session.idle", id, tl.terminal, tl.idleParts, tl.idleEvents)
		}
	}

	// Every node's consumer saw every durable event exactly once, in order.
	for n, seen := range seen {
		if len(seen) != len(all) {
			t.Errorf("consumer of node %d saw %d events, log has %d", n, len(seen), len(all))
		}
		for i, s := range seen {
			if s != int64(i+1) {
				t.Errorf("consumer of node %d: event %d has seq %d (gap or duplicate)", n, i, s)
				break
			}
		}
	}

	// No tool ran twice.
	counts := map[string]int{}
	if f, err := os.Open(counterPath); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			counts[strings.TrimSpace(sc.Text())]++
		}
		f.Close()
	}
	toolRuns := 0
	for tok, n := range counts {
		toolRuns += n
		if n > 1 {
			duplicates++
			t.Errorf("tool with token %s ran %d times", tok, n)
		}
	}

	// Status never said idle while a run of the session was in flight:
	// from when its admission was surely committed (a consumer had
	// received its first event; its Created time is taken before the
	// commit, which takes hundreds of milliseconds on a loaded disk) to
	// its end (stamped before the end's commit: later than that, surely).
	lies := 0
	for _, s := range samples {
		if s.status.Type != core.StatusIdle {
			continue
		}
		runs, _ := st.Runs(ctx, s.sessionID, 0)
		for _, r := range runs {
			committed, ok := arrived[admitted[r.ID]]
			if ok && committed < s.t0 && (r.Time.Ended == 0 || r.Time.Ended > s.t1+100) {
				lies++
				t.Errorf("status of %s said idle at %d..%d while run %s (created %d, seen committed %d, ended %d) was in flight",
					s.sessionID, s.t0, s.t1, r.ID, r.Time.Created, committed, r.Time.Ended)
				break
			}
		}
	}
	ic := "n/a"
	if sq, ok := st.(*sqlite.Store); ok {
		var err error
		if ic, err = sq.IntegrityCheck(ctx); err != nil || ic != "ok" {
			t.Errorf("integrity_check = %q, %v", ic, err)
		}
	}
	fmt.Printf("torture: prompts=%d kills=%d resumes=%d runs=%d tool_runs=%d events=%d status_samples=%d lost=%d duplicates=%d lies=%d unended=%d integrity=%s\n",
		len(acc), kills, resumes, len(tallies), toolRuns, len(all), len(samples), lost+dupRuns, duplicates, lies, badEnds, ic)
}
