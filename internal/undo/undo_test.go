package undo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/snapshot"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/postgres"
	"github.com/agentd/agentd/internal/store/postgres/pgtest"
	"github.com/agentd/agentd/internal/store/sqlite"
	"github.com/agentd/agentd/internal/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fixture is a session whose two turns changed files, recorded as the
// engine records them: a patch part per step naming the files and the
// snapshot from before them.
type fixture struct {
	t     *testing.T
	st    store.Store
	snaps *snapshot.Store
	ws    string
	sid   string
	users []string // the two turns' user messages
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "agentd.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return newFixtureOn(t, st)
}

// newFixtureOn is newFixture on the given store, which it closes.
func newFixtureOn(t *testing.T, st store.Store) *fixture {
	t.Helper()
	t.Cleanup(func() { st.Close() })
	snaps := snapshot.New(snapshot.Options{Dir: t.TempDir()})
	if !snaps.Enabled() {
		t.Skip("git is not installed")
	}
	f := &fixture{t: t, st: st, snaps: snaps, ws: t.TempDir()}
	sess := storetest.NewSession(f.ws, time.Now().UnixMilli())
	f.sid = sess.ID
	f.tx(func(tx store.Tx) error { return tx.InsertSession(t.Context(), sess) })
	f.write("f.txt", "v1\n")
	f.write("keep/k.txt", "untouched\n")
	f.step(func() {
		f.write("f.txt", "v2\n")
		f.write("g/new.txt", "made by turn one\n")
		for i := range 8 {
			f.write(fmt.Sprintf("many/m%d.txt", i), "turn one\n")
		}
	})
	f.step(func() {
		f.write("f.txt", "v3\n")
		os.Remove(filepath.Join(f.ws, "keep/k.txt"))
	})
	return f
}

func (f *fixture) tx(fn func(tx store.Tx) error) {
	f.t.Helper()
	if err := f.st.Tx(f.t.Context(), fn); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) write(name, body string) {
	f.t.Helper()
	p := filepath.Join(f.ws, name)
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// step records a turn: its user message, and an assistant message whose
// patch part names what change changed.
func (f *fixture) step(change func()) {
	f.t.Helper()
	ctx := f.t.Context()
	before, err := f.snaps.Track(ctx, f.ws)
	if err != nil {
		f.t.Fatal(err)
	}
	change()
	after, err := f.snaps.Track(ctx, f.ws)
	if err != nil {
		f.t.Fatal(err)
	}
	files, err := f.snaps.Changed(ctx, f.ws, before, after)
	if err != nil {
		f.t.Fatal(err)
	}
	model := core.ModelRef{ProviderID: "agentd", ModelID: "scripted"}
	u := core.Message{ID: core.NewID(core.PrefixMessage, false), SessionID: f.sid, Role: core.RoleUser, Created: time.Now().UnixMilli(), Agent: "build", Model: model}
	a := core.Message{ID: core.NewID(core.PrefixMessage, false), SessionID: f.sid, Role: core.RoleAssistant, ParentID: u.ID, Created: u.Created, Agent: "build", Model: model}
	patch := core.Part{ID: core.NewID(core.PrefixPart, false), SessionID: f.sid, MessageID: a.ID, Type: core.PartPatch, Hash: before, Files: files}
	f.tx(func(tx store.Tx) error {
		return errors.Join(tx.InsertMessage(ctx, u), tx.InsertMessage(ctx, a), tx.PutPart(ctx, patch))
	})
	f.users = append(f.users, u.ID)
}

// files reads the workspace (the snapshot store left out).
func (f *fixture) files() string {
	f.t.Helper()
	var out []string
	filepath.WalkDir(f.ws, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(f.ws, p)
		if d.IsDir() {
			if rel == ".agentd" {
				return filepath.SkipDir
			}
			return nil
		}
		b, _ := os.ReadFile(p)
		out = append(out, rel+"="+strings.TrimSpace(string(b)))
		return nil
	})
	sort.Strings(out)
	return strings.Join(out, " ")
}

// reverted is the workspace once both turns are undone.
const reverted = "f.txt=v1 keep/k.txt=untouched"

func (f *fixture) reverter(mod func(*Reverter)) *Reverter {
	r := New(Options{Store: f.st, Snapshots: f.snaps, Logger: quiet()})
	if mod != nil {
		mod(r)
	}
	f.t.Cleanup(r.Stop)
	return r
}

// revertEvents lists the revert.updated events of the session.
func (f *fixture) revertEvents() []RevertProps {
	f.t.Helper()
	evs, err := f.st.Events(f.t.Context(), store.EventQuery{SessionID: f.sid})
	if err != nil {
		f.t.Fatal(err)
	}
	var out []RevertProps
	for _, ev := range evs {
		if ev.Type == core.EventRevertUpdated {
			var p RevertProps
			json.Unmarshal(ev.Properties, &p)
			out = append(out, p)
		}
	}
	return out
}

func (f *fixture) session() core.Session {
	s, err := f.st.Session(f.t.Context(), f.sid)
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

// TestCrashAnywhereRecovered: a revert stopped dead at any point between
// its journal and its end (before a file, after any file, after the last)
// is finished by the next start, before anything else: every file
// reverted, the revert point written, the journal gone, and an event
// that says it was recovered; the next snapshot works.
func TestCrashAnywhereRecovered(t *testing.T) {
	t.Parallel()
	type cut struct {
		stage string
		done  int
	}
	cuts := []cut{{"journaled", 0}, {"applied", 0}}
	for i := 1; i <= 11; i++ {
		cuts = append(cuts, cut{"file", i})
	}
	for _, c := range cuts {
		t.Run(fmt.Sprintf("%s-%d", c.stage, c.done), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			ctx := t.Context()
			crashing := f.reverter(func(r *Reverter) {
				r.crash = func(stage string, done int) bool { return stage == c.stage && done == c.done }
			})
			if _, err := crashing.Revert(ctx, f.sid, f.users[0], ""); !errors.Is(err, ErrStopped) {
				t.Fatalf("crashed revert: %v", err)
			}
			if f.session().Revert != nil {
				t.Fatal("a revert cut off wrote its revert point")
			}
			if _, err := f.st.RevertJournal(ctx, f.sid); err != nil {
				t.Fatalf("no journal after the crash: %v", err)
			}
			if _, err := f.reverter(nil).Revert(ctx, f.sid, f.users[1], ""); !errors.Is(err, ErrReverting) {
				t.Errorf("another revert while one is journaled: %v", err)
			}
			restarted := f.reverter(nil)
			if err := restarted.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if got := f.files(); got != reverted {
				t.Errorf("workspace after recovery: %s, want %s", got, reverted)
			}
			s := f.session()
			if s.Revert == nil || s.Revert.MessageID != f.users[0] || !strings.Contains(s.Revert.Diff, "-v3") {
				t.Errorf("revert point after recovery: %+v", s.Revert)
			}
			evs := f.revertEvents()
			if len(evs) != 2 || evs[0].State != stateStarted || evs[1].State != stateFinished || !evs[1].Recovered || evs[1].Files != 11 {
				t.Errorf("events: %+v", evs)
			}
			if _, err := f.st.RevertJournal(ctx, f.sid); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("journal after recovery: %v", err)
			}
			f.write("f.txt", "after\n")
			if _, err := f.snaps.Track(ctx, f.ws); err != nil {
				t.Errorf("snapshot after recovery: %v", err)
			}
		})
	}
}

// TestUnrevertCrashRecovered: an unrevert cut off is finished at start
// too: the files are back as before the revert, the point cleared.
func TestUnrevertCrashRecovered(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	before := f.files()
	if _, err := f.reverter(nil).Revert(ctx, f.sid, f.users[0], ""); err != nil {
		t.Fatal(err)
	}
	crashing := f.reverter(func(r *Reverter) {
		r.crash = func(stage string, done int) bool { return stage == "file" && done == 3 }
	})
	if _, err := crashing.Unrevert(ctx, f.sid); !errors.Is(err, ErrStopped) {
		t.Fatalf("crashed unrevert: %v", err)
	}
	if err := f.reverter(nil).Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.files(); got != before || f.session().Revert != nil {
		t.Errorf("after the recovered unrevert: %s (revert %+v), want %s", got, f.session().Revert, before)
	}
}

// TestFailedRevertRolledBack: a journal that cannot be finished (here a
// snapshot object is gone) is rolled back to the present it names, and
// recorded so: no revert point, an event with the reason.
func TestFailedRevertRolledBack(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	before := f.files()
	crashing := f.reverter(func(r *Reverter) {
		r.crash = func(stage string, done int) bool { return stage == "file" && done == 4 }
	})
	crashing.Revert(ctx, f.sid, f.users[0], "")
	rec, err := f.st.RevertJournal(ctx, f.sid)
	if err != nil {
		t.Fatal(err)
	}
	var j journal
	json.Unmarshal(rec.Data, &j)
	for i := range j.Plan.Steps {
		if j.Plan.Steps[i].Path == "f.txt" {
			j.Plan.Steps[i].To.Blob = strings.Repeat("0", 40)
		}
	}
	rec.Data, _ = json.Marshal(j)
	f.tx(func(tx store.Tx) error {
		return errors.Join(tx.DeleteRevertJournal(ctx, f.sid, rec.ID), tx.PutRevertJournal(ctx, rec))
	})
	if err := f.reverter(nil).Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.files(); got != before {
		t.Errorf("after the rollback: %s, want %s", got, before)
	}
	evs := f.revertEvents()
	if f.session().Revert != nil || len(evs) != 2 || evs[1].State != stateRolledBack || !strings.Contains(evs[1].Error, "gone") {
		t.Errorf("revert %+v, events %+v", f.session().Revert, evs)
	}
}

// TestDetachedFromTheRequest: a request that goes away while its revert
// runs does not stop it: the revert ends whole and recorded; meanwhile
// another revert or an unrevert of the session is refused as busy.
func TestDetachedFromTheRequest(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	r := f.reverter(func(r *Reverter) {
		r.crash = func(stage string, done int) bool {
			if stage == "file" && done == 5 {
				once.Do(func() { close(reached) })
				<-release
			}
			return false
		}
	})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { _, err := r.Revert(ctx, f.sid, f.users[0], ""); errc <- err }()
	<-reached
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("the request's answer: %v", err)
	}
	if _, err := r.Revert(t.Context(), f.sid, f.users[1], ""); !errors.Is(err, ErrReverting) {
		t.Errorf("a second revert meanwhile: %v", err)
	}
	if _, err := r.Unrevert(t.Context(), f.sid); !errors.Is(err, ErrReverting) {
		t.Errorf("an unrevert meanwhile: %v", err)
	}
	close(release)
	r.Stop()
	if got := f.files(); got != reverted || f.session().Revert == nil {
		t.Errorf("after the request went: %s (revert %+v)", got, f.session().Revert)
	}
}

// TestTakeoverAfterLease: on several nodes a revert whose node died stays
// its until the journal's lease expires; then the next operation on the
// session (here another node's revert) finishes it first.
func TestTakeoverAfterLease(t *testing.T) {
	t.Parallel()
	testTakeover(t, newFixture(t))
}

// TestTakeoverOnPostgres is TestTakeoverAfterLease on PostgreSQL, the
// store several nodes share.
func TestTakeoverOnPostgres(t *testing.T) {
	t.Parallel()
	st, err := postgres.Open(t.Context(), pgtest.Schema(t), postgres.Options{Node: "test"})
	if err != nil {
		t.Fatal(err)
	}
	testTakeover(t, newFixtureOn(t, st))
}

func testTakeover(t *testing.T, f *fixture) {
	ctx := t.Context()
	dead := f.reverter(func(r *Reverter) {
		r.o.Node, r.o.Shared = "a", true
		r.crash = func(stage string, done int) bool { return stage == "file" && done == 2 }
	})
	dead.Revert(ctx, f.sid, f.users[1], "")
	now := time.Now()
	var mu sync.Mutex
	other := f.reverter(func(r *Reverter) {
		r.o.Node, r.o.Shared = "b", true
		r.clock = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	})
	if err := other.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Revert(ctx, f.sid, f.users[0], ""); !errors.Is(err, ErrReverting) {
		t.Fatalf("before the lease expired: %v", err)
	}
	mu.Lock()
	now = now.Add(other.o.TTL + time.Second)
	mu.Unlock()
	if _, err := other.Revert(ctx, f.sid, f.users[0], ""); err != nil {
		t.Fatal(err)
	}
	evs := f.revertEvents()
	if len(evs) != 4 || !evs[1].Recovered || evs[1].State != stateFinished || evs[3].State != stateFinished {
		t.Errorf("events: %+v", evs)
	}
	if got := f.files(); got != reverted {
		t.Errorf("workspace: %s", got)
	}
}

// TestIdleRules: unknown messages are not found, a session with an active
// run is busy, and nothing was journaled for either.
func TestIdleRules(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	r := f.reverter(nil)
	if _, err := r.Revert(ctx, f.sid, "msg_nope", ""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown message: %v", err)
	}
	run := core.Run{ID: core.NewID(core.PrefixRun, false), SessionID: f.sid, State: core.RunRunning, Time: core.RunTime{Created: time.Now().UnixMilli()}}
	f.tx(func(tx store.Tx) error { return tx.InsertRun(ctx, run) })
	if _, err := r.Revert(ctx, f.sid, f.users[0], ""); !errors.Is(err, ErrBusy) || errors.Is(err, ErrReverting) {
		t.Errorf("revert while a run is active: %v", err)
	}
	if list, _ := f.st.RevertJournals(ctx, 1<<62); len(list) != 0 {
		t.Errorf("journals: %+v", list)
	}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
