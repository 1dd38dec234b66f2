package schedule

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/engine"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/sqlite"
	"github.com/agentd/agentd/internal/store/storetest"
)

// clock is a test's time: it moves only when the test says.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// prompter stands in for the engine: it records the prompts and answers
// with err while one is set.
type prompter struct {
	mu    sync.Mutex
	calls []call
	err   error
}

type call struct {
	session string
	in      engine.PromptInput
}

func (p *prompter) Prompt(_ context.Context, sessionID string, in engine.PromptInput) (engine.Admission, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, call{sessionID, in})
	if p.err != nil {
		return engine.Admission{}, p.err
	}
	return engine.Admission{RunID: "run_" + in.MessageID, MessageID: in.MessageID}, nil
}

func (p *prompter) got() []call {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]call(nil), p.calls...)
}

func (p *prompter) fail(err error) {
	p.mu.Lock()
	p.err = err
	p.mu.Unlock()
}

type fixture struct {
	st  store.Store
	clk *clock
	eng *prompter
	// nodes share the store, the clock and the engine.
	nodes []*Scheduler
	sess  core.Session
}

func newFixture(t *testing.T, nodes int) *fixture {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "db"), sqlite.Options{Synchronous: "OFF"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fixture{st: st, clk: &clock{now: time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)}, eng: &prompter{}}
	for range nodes {
		f.nodes = append(f.nodes, New(st, f.eng, Config{Now: f.clk.Now, ClaimTTL: time.Minute}, nil, "test"))
	}
	f.sess = storetest.NewSession(t.TempDir(), 1)
	if err := st.Tx(t.Context(), func(tx store.Tx) error { return tx.InsertSession(t.Context(), f.sess) }); err != nil {
		t.Fatal(err)
	}
	return f
}

// pass runs one pass on every node at once and returns the ticks fired.
func (f *fixture) pass(t *testing.T) int {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	for _, n := range f.nodes {
		wg.Go(func() {
			k, err := n.RunDue(t.Context())
			if err != nil {
				t.Errorf("run due: %v", err)
			}
			mu.Lock()
			total += k
			mu.Unlock()
		})
	}
	wg.Wait()
	return total
}

func (f *fixture) create(t *testing.T, spec Spec) Schedule {
	t.Helper()
	v, err := f.nodes[0].Create(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func (f *fixture) get(t *testing.T, id string) Schedule {
	t.Helper()
	v, err := f.nodes[0].Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestTickFiresOncePerNodeSet: three schedulers on one store fire each
// tick of an interval once, with the prompt, agent and model asked for,
// and nothing between ticks.
func TestTickFiresOncePerNodeSet(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 3)
	model := &core.ModelRef{ProviderID: "agentd", ModelID: "scripted"}
	v := f.create(t, Spec{Every: "1m", Prompt: "reply:tick", SessionID: f.sess.ID, Agent: "build", Model: model})
	if want := f.clk.Now().Add(time.Minute).UnixMilli(); v.Next != want || v.Busy != BusySkip {
		t.Fatalf("created %+v, want next %d and busy skip", v, want)
	}
	if n := f.pass(t); n != 0 {
		t.Fatalf("fired %d before the first tick", n)
	}
	for tick := 1; tick <= 5; tick++ {
		f.clk.Add(time.Minute)
		if n := f.pass(t); n != 1 {
			t.Fatalf("tick %d fired %d times", tick, n)
		}
		if n := f.pass(t); n != 0 {
			t.Fatalf("tick %d fired again (%d)", tick, n)
		}
	}
	calls := f.eng.got()
	if len(calls) != 5 {
		t.Fatalf("%d prompts for 5 ticks", len(calls))
	}
	seen := map[string]bool{}
	for _, c := range calls {
		if c.session != f.sess.ID || c.in.Agent != "build" || *c.in.Model != *model || c.in.Parts[0].Text != "reply:tick" ||
			c.in.Policy != core.PolicyReject || seen[c.in.MessageID] {
			t.Errorf("prompt %+v", c)
		}
		seen[c.in.MessageID] = true
	}
	got := f.get(t, v.ID)
	if got.Last == nil || got.Last.RunID != "run_"+calls[4].in.MessageID || got.Last.Tick != f.clk.Now().UnixMilli() || got.Next != f.clk.Now().Add(time.Minute).UnixMilli() {
		t.Errorf("after five ticks: %+v last %+v", got, got.Last)
	}
}

// TestMissedTicksFireOnce: after a downtime of many ticks, the schedule
// fires once, records how many ticks it missed, and resumes its cadence
// at the first tick after now.
func TestMissedTicksFireOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 2)
	v := f.create(t, Spec{Every: "1m", Prompt: "p", SessionID: f.sess.ID})
	f.clk.Add(10*time.Minute + 30*time.Second)
	if n := f.pass(t); n != 1 {
		t.Fatalf("fired %d times after ten ticks of downtime", n)
	}
	got := f.get(t, v.ID)
	if got.Last.Tick != v.Next || got.Last.Missed != 9 || got.Next != v.Time.Created+11*60000 {
		t.Errorf("after the downtime: next %d last %+v", got.Next, got.Last)
	}
}

// TestBusyTickSkipped: a tick that finds the session running is
// recorded as skipped (busy skip), and the next tick fires as usual; a
// schedule that queues sends the queue policy.
func TestBusyTickSkipped(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1)
	v := f.create(t, Spec{Every: "1m", Prompt: "p", SessionID: f.sess.ID})
	f.eng.fail(engine.ErrBusy)
	f.clk.Add(time.Minute)
	if n := f.pass(t); n != 1 {
		t.Fatalf("fired %d", n)
	}
	got := f.get(t, v.ID)
	if got.Last.Skipped != "busy" || got.Last.RunID != "" || got.Firing || got.Next != v.Next+60000 {
		t.Errorf("busy tick: %+v %+v", got, got.Last)
	}
	f.eng.fail(nil)
	f.clk.Add(time.Minute)
	f.pass(t)
	if got := f.get(t, v.ID); got.Last.Skipped != "" || got.Last.RunID == "" {
		t.Errorf("the tick after: %+v", got.Last)
	}
	q := f.create(t, Spec{Every: "1m", Prompt: "q", SessionID: f.sess.ID, Busy: BusyQueue})
	f.clk.Add(time.Minute)
	f.pass(t)
	calls := f.eng.got()
	if last := calls[len(calls)-1]; last.in.Policy != core.PolicyQueue || last.in.Parts[0].Text != "q" {
		t.Errorf("queued schedule %s sent %+v", q.ID, last)
	}
}

// TestPendingTickTakenOver: a node that claimed a tick and could not send
// it (here the engine failed; a node killed does the same) leaves it
// pending; once the claim lapses another node sends it with the same
// message id, so the engine admits it once.
func TestPendingTickTakenOver(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 2)
	v := f.create(t, Spec{Every: "1h", Prompt: "p", SessionID: f.sess.ID})
	f.eng.fail(errors.New("disk on fire"))
	f.clk.Add(time.Hour)
	if _, err := f.nodes[0].RunDue(t.Context()); err == nil {
		t.Fatal("the failure was not reported")
	}
	if got := f.get(t, v.ID); !got.Firing || got.Last != nil {
		t.Fatalf("a tick that failed to send is not pending: %+v", got)
	}
	f.eng.fail(nil)
	f.clk.Add(59 * time.Second)
	if n := f.pass(t); n != 0 {
		t.Fatalf("taken over before its claim lapsed: %d", n)
	}
	f.clk.Add(2 * time.Second)
	if n := f.pass(t); n != 1 {
		t.Fatalf("taken over %d times", n)
	}
	calls := f.eng.got()
	if len(calls) != 2 || calls[0].in.MessageID != calls[1].in.MessageID {
		t.Fatalf("the retry sent another message: %+v", calls)
	}
	got := f.get(t, v.ID)
	if got.Firing || got.Last == nil || got.Last.Tick != v.Next || got.Last.MessageID != calls[0].in.MessageID {
		t.Errorf("after the takeover: %+v %+v", got, got.Last)
	}
}

// TestNewSessionEachTick: a schedule without a session makes one per
// tick, in its directory, titled after it, announced like any new session.
func TestNewSessionEachTick(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1)
	dir := t.TempDir()
	v := f.create(t, Spec{Name: "nightly", Cron: "*/5 * * * *", Prompt: "p", NewSession: true, Directory: dir})
	var sessions []string
	for range 2 {
		f.clk.Add(5 * time.Minute)
		f.pass(t)
		last := f.get(t, v.ID).Last
		s, err := f.st.Session(t.Context(), last.SessionID)
		if err != nil || s.Directory != dir || s.Title != "Scheduled: nightly" {
			t.Fatalf("tick's session %+v %v", s, err)
		}
		sessions = append(sessions, s.ID)
	}
	if sessions[0] == sessions[1] {
		t.Error("two ticks shared a session")
	}
	evs, _ := f.st.Events(t.Context(), store.EventQuery{SessionID: sessions[1]})
	if len(evs) != 1 || evs[0].Type != core.EventSessionCreated {
		t.Errorf("events of the new session: %+v", evs)
	}
}

// TestCreateRefused: specs that cannot work are refused before they are
// stored.
func TestCreateRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1)
	for _, spec := range []Spec{
		{Prompt: "p", SessionID: f.sess.ID},
		{Cron: "* * * * *", Every: "1m", Prompt: "p", SessionID: f.sess.ID},
		{Every: "1ms", Prompt: "p", SessionID: f.sess.ID},
		{Every: "1m", Timezone: "UTC", Prompt: "p", SessionID: f.sess.ID},
		{Cron: "* * * * *", Timezone: "Mars/Olympus", Prompt: "p", SessionID: f.sess.ID},
		{Every: "1m", Prompt: " ", SessionID: f.sess.ID},
		{Every: "1m", Prompt: "p"},
		{Every: "1m", Prompt: "p", SessionID: f.sess.ID, NewSession: true},
		{Every: "1m", Prompt: "p", SessionID: "ses_missing"},
		{Every: "1m", Prompt: "p", SessionID: "nope"},
		{Every: "1m", Prompt: "p", SessionID: f.sess.ID, Busy: "steer"},
		{Every: "1m", Prompt: "p", SessionID: f.sess.ID, Model: &core.ModelRef{ProviderID: "x"}},
	} {
		var in *InputError
		if _, err := f.nodes[0].Create(t.Context(), spec); !errors.As(err, &in) {
			t.Errorf("%+v: %v, want an input error", spec, err)
		}
	}
	if list, _ := f.nodes[0].List(t.Context()); len(list) != 0 {
		t.Errorf("refused specs were stored: %+v", list)
	}
}

// TestStartStop: Stop is safe before Start and twice; a started
// scheduler fires on its own and leaves no goroutine (TestMain checks).
func TestStartStop(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1)
	n := New(f.st, f.eng, Config{Now: f.clk.Now, Poll: 5 * time.Millisecond}, nil, "test")
	n.Stop()
	f.create(t, Spec{Every: "1m", Prompt: "p", SessionID: f.sess.ID})
	f.clk.Add(time.Minute)
	if err := n.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	n.Start(t.Context())
	deadline := time.Now().Add(10 * time.Second)
	for len(f.eng.got()) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	n.Stop()
	n.Stop()
	if len(f.eng.got()) != 1 {
		t.Errorf("prompts sent by the loop: %d", len(f.eng.got()))
	}
}
