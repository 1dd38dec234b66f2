package engine

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/events"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/modelview"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/sqlite"
	"github.com/agentd/agentd/internal/tool"
)

// longSession writes a session of n messages (prompts, answers with a
// tool call each) and a running run answering one more prompt, and
// returns an engine over it with that run.
func longSession(b testing.TB, n int) (*Engine, core.Run) {
	b.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "a.db"), sqlite.Options{Synchronous: "OFF"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	now := int64(1_700_000_000_000)
	sess := core.Session{ID: core.NewID(core.PrefixSession, true), Directory: b.TempDir(), Title: "bench",
		Time: core.SessionTime{Created: now, Updated: now}}
	var run core.Run
	err = st.Tx(ctx, func(tx store.Tx) error {
		if err := tx.InsertSession(ctx, sess); err != nil {
			return err
		}
		for i := 0; i <= n/2; i++ {
			runID := core.NewID(core.PrefixRun, false)
			user := core.Message{ID: core.NewID(core.PrefixMessage, false), SessionID: sess.ID, Role: core.RoleUser,
				Created: now, Agent: "build", RunID: runID}
			if err := tx.PutMessage(ctx, user); err != nil {
				return err
			}
			if err := tx.PutPart(ctx, core.Part{ID: core.NewID(core.PrefixPart, false), SessionID: sess.ID, MessageID: user.ID,
				Type: core.PartText, Text: strings.Repeat("please change the parser ", 8)}); err != nil {
				return err
			}
			if i == n/2 {
				run = core.Run{ID: runID, SessionID: sess.ID, State: core.RunRunning, UserMessageID: user.ID,
					Model: core.ModelRef{ProviderID: "agentd", ModelID: "scripted"}, Time: core.RunTime{Created: now}}
				return tx.InsertRun(ctx, run)
			}
			asst := core.Message{ID: core.NewID(core.PrefixMessage, false), SessionID: sess.ID, Role: core.RoleAssistant,
				Created: now, Completed: now, ParentID: user.ID, RunID: runID}
			if err := tx.PutMessage(ctx, asst); err != nil {
				return err
			}
			for _, p := range []core.Part{
				{Type: core.PartText, Text: strings.Repeat("I changed the parser as asked. ", 10)},
				{Type: core.PartTool, CallID: "call", Tool: "read", State: core.ToolState{Status: core.ToolCompleted,
					Input: []byte(`{"filePath":"parser.go"}`), Output: strings.Repeat("00001| func parse() {}\n", 40), Time: core.PartTime{Start: now, End: now}}},
			} {
				p.ID, p.SessionID, p.MessageID = core.NewID(core.PrefixPart, false), sess.ID, asst.ID
				if err := tx.PutPart(ctx, p); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	e := New(st, events.NewHub(st, 0, 0), nil, tool.NewRegistry(), Config{})
	return e, run
}

// BenchmarkStepRequest is what building one step's request costs in a
// 500-message session once the run's prefix is cached: read the run's own
// messages, convert, assemble.
func BenchmarkStepRequest(b *testing.B) {
	e, run := longSession(b, 500)
	r := &runner{e: e, run: run, system: []string{"system"}, model: llm.Model{Name: "m"}}
	ctx := context.Background()
	if _, _, err := r.history(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		h, _, err := r.history(ctx)
		if err != nil {
			b.Fatal(err)
		}
		_ = r.request(h)
	}
}

// BenchmarkFirstStepRequest is the same for the first step of a run,
// whose prefix (the 500 earlier messages) comes from the per-session
// cache left by the previous run.
func BenchmarkFirstStepRequest(b *testing.B) {
	e, run := longSession(b, 500)
	ctx := context.Background()
	warm := &runner{e: e, run: run}
	if _, _, err := warm.history(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		r := &runner{e: e, run: run, system: []string{"system"}}
		h, _, err := r.history(ctx)
		if err != nil {
			b.Fatal(err)
		}
		_ = r.request(h)
	}
}

// BenchmarkColdRequest reads and converts the whole 500-message session,
// as after a restart or a compaction.
func BenchmarkColdRequest(b *testing.B) {
	e, run := longSession(b, 500)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		e.history.Drop(run.SessionID)
		r := &runner{e: e, run: run}
		if _, _, err := r.history(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompactionSize reports the size of the next request of a
// 500-message session before and after a compaction (summary and tail).
func BenchmarkCompactionSize(b *testing.B) {
	e, run := longSession(b, 500)
	ctx := context.Background()
	r := &runner{e: e, run: run}
	before, _, err := r.history(ctx)
	if err != nil {
		b.Fatal(err)
	}
	msgs, err := e.st.Messages(ctx, run.SessionID, store.MessageQuery{})
	if err != nil {
		b.Fatal(err)
	}
	// A completed compaction whose tail is the run's prompt.
	now := int64(1_700_000_000_001)
	user := core.MessageWithParts{Info: core.Message{ID: core.NewID(core.PrefixMessage, false), SessionID: run.SessionID, Role: core.RoleUser}}
	user.Parts = []core.Part{{Type: core.PartCompaction, Auto: true, TailStart: run.UserMessageID}}
	sum := core.MessageWithParts{Info: core.Message{ID: core.NewID(core.PrefixMessage, false), Role: core.RoleAssistant,
		Summary: true, Completed: now, ParentID: user.Info.ID}, Parts: []core.Part{{Type: core.PartText, Text: strings.Repeat("summary ", 250)}}}
	msgs = append(msgs, user, sum)
	var after []llm.Message
	b.ReportAllocs()
	for b.Loop() {
		after, _ = modelview.Compose(run.ID, msgs, nil)
	}
	b.ReportMetric(float64(estimate(nil, before, nil)), "tokens-before")
	b.ReportMetric(float64(estimate(nil, after, nil)), "tokens-after")
}
