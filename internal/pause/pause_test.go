package pause

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/sqlite"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestReason: a session's own setting wins over the server's.
func TestReason(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		server  bool
		session string
		want    string
	}{
		{false, "", ""}, {true, "", ServerReason}, {true, Auto, ""}, {false, Paused, SessionReason}, {true, Paused, SessionReason},
	} {
		if got := (Policy{Server: c.server}).Reason(core.Session{Resume: c.session}); got != c.want {
			t.Errorf("server %v session %q: %q, want %q", c.server, c.session, got, c.want)
		}
	}
	if Check("later") == nil || Check(Paused) != nil || Check("") != nil || Check(Auto) != nil {
		t.Error("Check accepts the wrong values")
	}
}

// TestQueuedHeldAndResumed: a session's next run that had not begun is
// held (still queued, phase paused, its status saying why); the resume
// lets it start as it would have; a second resume finds nothing paused.
func TestQueuedHeldAndResumed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "a.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now().UnixMilli()
	sess := core.Session{ID: core.NewID(core.PrefixSession, true), Directory: t.TempDir(), Resume: Paused,
		Time: core.SessionTime{Created: now, Updated: now}}
	run := core.Run{ID: core.NewID(core.PrefixRun, false), SessionID: sess.ID, State: core.RunQueued, Time: core.RunTime{Created: now}}
	err = st.Tx(ctx, func(tx store.Tx) error {
		if err := tx.InsertSession(ctx, sess); err != nil {
			return err
		}
		return tx.InsertRun(ctx, run)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := (Policy{}).HoldQueued(ctx, st, []core.Run{run}); err != nil {
		t.Fatal(err)
	}
	status, err := st.SessionStatus(ctx, sess.ID)
	if err != nil || status.Type != core.StatusBusy || status.Phase != core.PhasePaused || status.Message != SessionReason {
		t.Fatalf("held status = %+v %v", status, err)
	}
	if err := Resume(ctx, st, sess.ID); err != nil {
		t.Fatal(err)
	}
	got, err := st.Run(ctx, run.ID)
	if err != nil || got.State != core.RunQueued || got.Phase != "" || got.Paused != "" {
		t.Errorf("resumed run = %+v %v", got, err)
	}
	if err := Resume(ctx, st, sess.ID); !errors.Is(err, ErrNotPaused) {
		t.Errorf("second resume: %v", err)
	}
}
