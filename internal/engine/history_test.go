package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/modelview"
	"github.com/agentd/agentd/internal/store"
)

// A step's view of the run, kept from the run's own writes, is exactly the
// view read whole: through steps whose tool calls end after the read,
// messages steered in (before and after the run's own), and a
// compaction's pruning.
func TestHistoryKeptBetweenStepsEqualsWhole(t *testing.T) {
	t.Parallel()
	e, run := longSession(t, 20)
	ctx := t.Context()
	r := &runner{e: e, run: run}
	check := func(what string) {
		t.Helper()
		got, gotParent, err := r.history(ctx)
		if err != nil {
			t.Fatal(err)
		}
		whole := &runner{e: e, run: run}
		want, wantParent, err := whole.history(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" || gotParent != wantParent {
			t.Errorf("%s: kept view differs from the whole (-whole +kept):\n%s\nparent %s, want %s", what, diff, gotParent, wantParent)
		}
	}
	// write commits as the run; steer as someone else.
	write := func(fn func(tx store.Tx) error) {
		t.Helper()
		if err := r.tx(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	steer := func(text string) { addPrompt(t, e, run, run.ID, text) }
	now := run.Time.Created
	check("first step")
	// A step: its message and a tool call still running when the next
	// read comes, then completed.
	step := func() (core.Message, core.Part) {
		m := core.Message{ID: core.NewID(core.PrefixMessage, false), SessionID: run.SessionID, Role: core.RoleAssistant,
			Created: now, ParentID: run.UserMessageID, RunID: run.ID}
		p := core.Part{ID: core.NewID(core.PrefixPart, false), SessionID: run.SessionID, MessageID: m.ID, Type: core.PartTool,
			CallID: "call_" + m.ID, Tool: "read", State: core.ToolState{Status: core.ToolRunning, Input: []byte(`{}`)}}
		write(func(tx store.Tx) error {
			if err := tx.PutMessage(ctx, m); err != nil {
				return err
			}
			return tx.PutPart(ctx, p)
		})
		return m, p
	}
	_, p1 := step()
	check("a tool call running")
	p1.State.Status, p1.State.Output = core.ToolCompleted, "the file"
	write(func(tx store.Tx) error { return tx.PutPart(ctx, p1) })
	check("the tool call completed after the read")
	_, p2 := step()
	steer("and also this")
	check("a message steered in after the run's")
	p2.State.Status, p2.State.Output = core.ToolCompleted, "more"
	write(func(tx store.Tx) error { return tx.PutPart(ctx, p2) })
	check("the second tool call completed")
	steer("one more thing")
	_, p3 := step()
	p3.State.Status, p3.State.Output = core.ToolCompleted, "done"
	write(func(tx store.Tx) error { return tx.PutPart(ctx, p3) })
	check("a message steered in before the run's")
	write(func(tx store.Tx) error { return nil })
	check("nothing written")
	// Pruning changes a message read long ago; the runner forgets its view.
	p1.State.Time.Compacted = now
	write(func(tx store.Tx) error { return tx.PutPart(ctx, p1) })
	r.forgetHistory()
	check("after pruning")
	// A step does not read back what its run wrote: an edit of one of the
	// run's parts by someone else (which nothing does while a run
	// executes) goes unseen, and CheckHistory reports it.
	e.cfg.CheckHistory = true
	check("checked")
	p3.State.Output = "edited behind the run's back"
	if err := e.st.Tx(ctx, func(tx store.Tx) error { return tx.PutPart(ctx, p3) }); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.history(ctx); err == nil || !strings.Contains(err.Error(), "differs from the store") {
		t.Fatalf("an edit behind the run's back: %v", err)
	}
}

// The view an ended run hands to the cache, with what the next run reads
// after it, equals the next run's prefix read whole: through a tool step,
// a message steered in and a final answer.
func TestKeptHistoryEqualsWholePrefix(t *testing.T) {
	t.Parallel()
	e, run := longSession(t, 20)
	ctx := t.Context()
	write := func(fn func(tx store.Tx) error) {
		t.Helper()
		if err := e.st.Tx(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	r := &runner{e: e, run: run}
	message := func(runID string, role string, part core.Part) core.Message {
		t.Helper()
		m := core.Message{ID: core.NewID(core.PrefixMessage, false), SessionID: run.SessionID, Role: role,
			Created: run.Time.Created, RunID: runID, Agent: "build"}
		if role == core.RoleAssistant {
			m.ParentID = run.UserMessageID
		}
		part.ID, part.SessionID, part.MessageID = core.NewID(core.PrefixPart, false), run.SessionID, m.ID
		fn := func(tx store.Tx) error {
			if err := tx.PutMessage(ctx, m); err != nil {
				return err
			}
			return tx.PutPart(ctx, part)
		}
		if runID == run.ID && role == core.RoleAssistant {
			// The run's own, kept from its writes.
			if err := r.tx(ctx, fn); err != nil {
				t.Fatal(err)
			}
		} else {
			write(fn)
		}
		return m
	}
	read := func() {
		t.Helper()
		if _, _, err := r.history(ctx); err != nil {
			t.Fatal(err)
		}
	}
	read()
	message(run.ID, core.RoleAssistant, core.Part{Type: core.PartTool, CallID: "call_1", Tool: "read",
		State: core.ToolState{Status: core.ToolCompleted, Input: []byte(`{"filePath":"a.go"}`), Output: "package a"}})
	read()
	message(run.ID, core.RoleUser, core.Part{Type: core.PartText, Text: "and also this"})
	message(run.ID, core.RoleAssistant, core.Part{Type: core.PartTool, CallID: "call_2", Tool: "read",
		State: core.ToolState{Status: core.ToolCompleted, Input: []byte(`{"filePath":"b.go"}`), Output: "package b"}})
	read()
	// The answer, written after the last step's read.
	final := message(run.ID, core.RoleAssistant, core.Part{Type: core.PartText, Text: "All done."})
	r.keepHistory(ctx)
	if through := e.history.Through(run.SessionID); through != final.ID {
		t.Fatalf("the ended run left no view through its answer in the cache: through %q", through)
	}

	next := core.Run{ID: core.NewID(core.PrefixRun, false), SessionID: run.SessionID, State: core.RunRunning, Time: run.Time}
	next.UserMessageID = message(next.ID, core.RoleUser, core.Part{Type: core.PartText, Text: "next"}).ID
	got, err := e.history.Prefix(ctx, e.st, next)
	if err != nil {
		t.Fatal(err)
	}
	want, err := (&modelview.Cache{}).Prefix(ctx, e.st, next)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("prefix from the kept view differs from a whole read (-whole +kept):\n%s", diff)
	}

	// A revert to the ended run's first message, then a prompt: the
	// reverted messages are retired, and the next run's prefix leaves them
	// out although the cache kept them.
	write(func(tx store.Tx) error {
		_, _, err := tx.RetireFrom(ctx, run.SessionID, run.UserMessageID, "", "revert")
		return err
	})
	third := core.Run{ID: core.NewID(core.PrefixRun, false), SessionID: run.SessionID, State: core.RunRunning, Time: run.Time}
	third.UserMessageID = message(third.ID, core.RoleUser, core.Part{Type: core.PartText, Text: "after the revert"}).ID
	got, err = e.history.Prefix(ctx, e.st, third)
	if err != nil {
		t.Fatal(err)
	}
	want, err = (&modelview.Cache{}).Prefix(ctx, e.st, third)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after a revert, the prefix from the kept view differs from a whole read (-whole +kept):\n%s", diff)
	}
}

// countingStore counts the reads of what comes before a run.
type countingStore struct {
	store.Store
	prefixReads int
}

func (c *countingStore) Messages(ctx context.Context, sessionID string, q store.MessageQuery) ([]core.MessageWithParts, error) {
	if q.Before != "" {
		c.prefixReads++
	}
	return c.Store.Messages(ctx, sessionID, q)
}

// A run reads what came before it once, also when nothing did (a
// session's first prompt): an empty prefix once looked unread, and every
// step of a first run read it again.
func TestPrefixReadOncePerRun(t *testing.T) {
	t.Parallel()
	for _, earlier := range []int{0, 6} {
		e, run := longSession(t, earlier)
		counting := &countingStore{Store: e.st}
		e.st = counting
		r := &runner{e: e, run: run}
		for range 3 {
			if _, _, err := r.history(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		if counting.prefixReads != 1 {
			t.Errorf("%d earlier messages: the prefix was read %d times in three steps, want once", earlier, counting.prefixReads)
		}
	}
}

// A prompt queued behind the running run belongs to the next run: the
// running run's later steps do not send it to the model (it would answer
// it, and the queued run again). A message added without a run (no reply
// asked) is context for the running one, and an earlier run's stays.
func TestQueuedPromptNotInRunningRun(t *testing.T) {
	t.Parallel()
	e, run := longSession(t, 4)
	e.cfg.CheckHistory = true
	ctx := t.Context()
	r := &runner{e: e, run: run}
	if _, _, err := r.history(ctx); err != nil {
		t.Fatal(err)
	}
	add := func(runID, text string) { addPrompt(t, e, run, runID, text) }
	next := core.Run{ID: core.NewID(core.PrefixRun, false), SessionID: run.SessionID, State: core.RunQueued, Time: run.Time}
	if err := e.st.Tx(ctx, func(tx store.Tx) error { return tx.InsertRun(ctx, next) }); err != nil {
		t.Fatal(err)
	}
	add(next.ID, "queued for the next run")
	add("", "a note without a reply")
	add(core.NewID(core.PrefixRun, false), "an ended run's")
	got, parent, err := r.history(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, m := range got {
		for _, c := range m.Content {
			texts = append(texts, c.Text)
		}
	}
	all := strings.Join(texts, "|")
	if strings.Contains(all, "queued for the next run") || !strings.Contains(all, "a note without a reply") ||
		!strings.Contains(all, "an ended run's") || parent != run.UserMessageID {
		t.Errorf("the running run's conversation: %q, parent %s (want %s)", all, parent, run.UserMessageID)
	}
}

// addPrompt writes, as someone other than run's runner, a user message of
// run runID in run's session with one text part.
func addPrompt(t *testing.T, e *Engine, run core.Run, runID, text string) {
	t.Helper()
	ctx := t.Context()
	m := core.Message{ID: core.NewID(core.PrefixMessage, false), SessionID: run.SessionID, Role: core.RoleUser,
		Created: run.Time.Created, Agent: "build", RunID: runID}
	err := e.st.Tx(ctx, func(tx store.Tx) error {
		if err := tx.InsertMessage(ctx, m); err != nil {
			return err
		}
		return tx.PutPart(ctx, core.Part{ID: core.NewID(core.PrefixPart, false), SessionID: run.SessionID, MessageID: m.ID,
			Type: core.PartText, Text: text})
	})
	if err != nil {
		t.Fatal(err)
	}
}
