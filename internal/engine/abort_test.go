package engine_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/engine"
	"github.com/agentd/agentd/internal/events"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/llm/scripted"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/sqlite"
	"github.com/agentd/agentd/internal/tool"
)

// endRefused is a store that refuses, once, the write of a run's end: the
// execution that an abort cancelled cannot record the end, and the run is
// taken up again.
type endRefused struct {
	store.Store
	refused atomic.Bool
}

func (s *endRefused) Tx(ctx context.Context, fn func(store.Tx) error) error {
	return s.Store.Tx(ctx, func(tx store.Tx) error { return fn(&endRefusedTx{Tx: tx, s: s}) })
}

type endRefusedTx struct {
	store.Tx
	s *endRefused
}

func (tx *endRefusedTx) UpdateRunJSON(ctx context.Context, r core.Run, data []byte) error {
	if core.TerminalState(r.State) && tx.s.refused.CompareAndSwap(false, true) {
		return errors.New("the end of the run could not be written")
	}
	return tx.Tx.UpdateRunJSON(ctx, r, data)
}

// TestAbortOutlivesAFailedEnd: an abort answers only once the run has
// ended. When the cancelled execution cannot write the end and the run is
// executed again (here at once), the abort reaches that execution too: it
// does not report the run aborted while its blocking tool runs again.
func TestAbortOutlivesAFailedEnd(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "agentd.db"), sqlite.Options{Synchronous: "OFF"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, last, err := st.EventBounds(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	hub := events.NewHub(st, last, 0)
	st.SetCommitHook(hub.Publish)
	models := llm.NewRegistry()
	models.Add(scripted.ProviderID, &scripted.Model{Second: 10 * time.Millisecond}, nil)
	started := make(chan struct{}, 4)
	block := &tool.Func{ToolName: "block", Desc: "Block until cancelled.", Fn: func(ctx context.Context, _ tool.Call) (tool.Result, error) {
		started <- struct{}{}
		<-ctx.Done()
		return tool.Errorf("cancelled"), nil
	}}
	wrapped := &endRefused{Store: st}
	e := engine.New(wrapped, hub, models, tool.NewRegistry(block), engine.Config{
		DefaultModel: core.ModelRef{ProviderID: scripted.ProviderID, ModelID: scripted.ModelID},
		Resume:       true, Logger: slog.New(slog.DiscardHandler), OutputDir: t.TempDir(),
	})
	if err := e.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	n := &node{t: t, st: st, e: e, dir: t.TempDir()}
	sid := n.session()
	adm, err := e.Prompt(t.Context(), sid, engine.PromptInput{Parts: []engine.InputPart{{Type: core.PartText, Text: "tool:block:{}"}}})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	if ok, err := e.Abort(t.Context(), sid); err != nil || !ok {
		t.Fatalf("abort = %v, %v", ok, err)
	}
	if !wrapped.refused.Load() {
		t.Fatal("the end of the run was never refused")
	}
	run, err := st.Run(t.Context(), adm.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if run.State != core.RunInterrupted || run.Reason != core.ReasonAborted {
		t.Fatalf("after the abort answered, the run is %s/%s", run.State, run.Reason)
	}
}
