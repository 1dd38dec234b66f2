package engine

import (
	"slices"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/modelview"
	"github.com/agentd/agentd/internal/store"
)

// Config.CheckHistory is what lets the engine's and the app's tests trust
// the state a runner keeps instead of reading it: each comparison must
// fail the run when the kept state and the store's part ways. These tests
// corrupt the kept state by hand and require the failure.

// TestCheckHistoryComparesTheCachedPrefix: the conversation before the
// run, when the session's cache gives it, is compared with a whole read;
// a cache entry that differs from the store fails the step.
func TestCheckHistoryComparesTheCachedPrefix(t *testing.T) {
	t.Parallel()
	e, run := longSession(t, 6)
	e.cfg.CheckHistory = true
	ctx := t.Context()
	before, err := e.st.Messages(ctx, run.SessionID, store.MessageQuery{Before: run.UserMessageID})
	if err != nil || len(before) == 0 {
		t.Fatalf("messages before the run: %d, %v", len(before), err)
	}
	lastBefore := before[len(before)-1].Info
	whole, err := (&modelview.Cache{}).Prefix(ctx, e.st, run)
	if err != nil || len(whole) == 0 {
		t.Fatalf("prefix: %d messages, %v", len(whole), err)
	}
	// The cache as the previous run would have left it: the step uses it,
	// and it agrees with the store.
	e.history.Put(run.SessionID, lastBefore.ID, lastBefore.Seq, whole)
	if _, _, err := (&runner{e: e, run: run}).history(ctx); err != nil {
		t.Fatalf("a step with a faithful cache: %v", err)
	}
	// A cache that says something the store does not.
	wrong := slices.Clone(whole)
	wrong[0].Content = []llm.Content{{Type: llm.ContentText, Text: "something nobody said"}}
	e.history.Put(run.SessionID, lastBefore.ID, lastBefore.Seq, wrong)
	_, _, err = (&runner{e: e, run: run}).history(ctx)
	if err == nil || !strings.Contains(err.Error(), "conversation before it from the cache differs") {
		t.Fatalf("a step with a cache that differs from the store: %v", err)
	}
}

// TestCheckHistoryComparesTheEndOfARun: at a run's end, the messages and
// usage the runner kept are compared with the store's; the run does not
// end on kept state that differs (a message missing, a step's usage).
func TestCheckHistoryComparesTheEndOfARun(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		corrupt func(own []core.MessageWithParts, id string) []core.MessageWithParts
	}{
		{"faithful", nil},
		{"a step's cost", func(own []core.MessageWithParts, id string) []core.MessageWithParts {
			own[slices.IndexFunc(own, func(m core.MessageWithParts) bool { return m.Info.ID == id })].Info.Cost = 7
			return own
		}},
		{"a step's tokens", func(own []core.MessageWithParts, id string) []core.MessageWithParts {
			own[slices.IndexFunc(own, func(m core.MessageWithParts) bool { return m.Info.ID == id })].Info.Tokens.Output = 9999
			return own
		}},
		{"a step's message", func(own []core.MessageWithParts, id string) []core.MessageWithParts {
			return slices.DeleteFunc(own, func(m core.MessageWithParts) bool { return m.Info.ID == id })
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e, run := longSession(t, 4)
			e.cfg.CheckHistory = true
			ctx := t.Context()
			r := &runner{e: e, run: run}
			// Two steps of the run, each with its usage; the second is the
			// one the end completes.
			var steps []core.Message
			for i := range 2 {
				m := core.Message{ID: core.NewID(core.PrefixMessage, false), SessionID: run.SessionID, Role: core.RoleAssistant,
					Created: run.Time.Created, Completed: run.Time.Created, ParentID: run.UserMessageID, RunID: run.ID,
					Cost: 0.25, Tokens: core.Tokens{Input: 100 * int64(i+1), Output: 10}}
				if err := r.tx(ctx, func(tx store.Tx) error { return tx.PutMessage(ctx, m) }); err != nil {
					t.Fatal(err)
				}
				steps = append(steps, m)
			}
			if _, _, err := r.history(ctx); err != nil {
				t.Fatal(err)
			}
			if c.corrupt != nil {
				r.own = c.corrupt(r.own, steps[0].ID)
			}
			err := r.finish(ctx, succeeded)
			got, rerr := e.st.Run(ctx, run.ID)
			if rerr != nil {
				t.Fatal(rerr)
			}
			if c.corrupt == nil {
				if err != nil || got.State != core.RunSucceeded {
					t.Fatalf("the end of a run with faithful kept state: %v, run %s", err, got.State)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "differs from the store's") {
				t.Errorf("the end of a run whose kept messages drifted: %v", err)
			}
			if got.State != core.RunRunning {
				t.Errorf("the run ended %s on kept state that differs from the store's", got.State)
			}
		})
	}
}
