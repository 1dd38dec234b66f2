package engine

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/events"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/llm/scripted"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/sqlite"
	"github.com/agentd/agentd/internal/store/storetest"
	"github.com/agentd/agentd/internal/tool"
)

// titleModel is the scripted model, noting the title requests it gets.
type titleModel struct {
	scripted.Model
	mu     sync.Mutex
	titles []string // the prompt each title request was for
}

func (m *titleModel) Stream(ctx context.Context, req llm.Request, emit func(llm.Event) error) error {
	if req.Purpose == llm.PurposeTitle {
		m.mu.Lock()
		m.titles = append(m.titles, req.Messages[0].Content[0].Text)
		m.mu.Unlock()
	}
	return m.Model.Stream(ctx, req, emit)
}

func (m *titleModel) requested() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.titles...)
}

// TestTitleFromTheFirstPromptOnly: a session's title is written from its
// first prompt, by the small model; a later prompt asks for no other, and
// a session whose title a person set asks for none. Titles are written off
// the run's path: the engine's goroutines ending (e.wg) and the title
// writers' (e.titles.Wait) is what the test waits for, so that a title request
// that should not happen would have happened by then.
func TestTitleFromTheFirstPromptOnly(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "a.db"), sqlite.Options{Synchronous: "OFF"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	hub := events.NewHub(st, 0, 0)
	st.SetCommitHook(hub.Publish)
	big, small := &titleModel{Model: scripted.Model{Second: time.Millisecond}}, &titleModel{Model: scripted.Model{Second: time.Millisecond}}
	models := llm.NewRegistry()
	models.Add("big", big, map[string]llm.Model{"m": {Name: "m"}})
	models.Add("small", small, map[string]llm.Model{"m": {Name: "m"}})
	e := New(st, hub, models, tool.NewRegistry(), Config{
		DefaultModel: core.ModelRef{ProviderID: "big", ModelID: "m"}, SmallModel: &core.ModelRef{ProviderID: "small", ModelID: "m"},
		Logger: slog.New(slog.DiscardHandler), OutputDir: t.TempDir(), CheckHistory: true,
	})
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer e.Stop()

	session := func(title string) string {
		s := storetest.NewSession(t.TempDir(), time.Now().UnixMilli())
		s.Title = title
		if err := st.Tx(ctx, func(tx store.Tx) error { return tx.InsertSession(ctx, s) }); err != nil {
			t.Fatal(err)
		}
		return s.ID
	}
	// send runs a prompt to its end and waits for the engine's background
	// work, the title writers included.
	send := func(sid, text string) {
		t.Helper()
		adm, err := e.Prompt(ctx, sid, PromptInput{Parts: []InputPart{{Type: core.PartText, Text: text}}})
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if run, err := e.WaitRun(wctx, adm.RunID); err != nil || run.State != core.RunSucceeded {
			t.Fatalf("run %+v, %v", run, err)
		}
		e.wg.Wait()
		e.titles.Wait()
	}
	title := func(sid string) string {
		s, err := st.Session(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		return s.Title
	}

	sid := session(core.DefaultTitle(time.Now()))
	send(sid, "title:Fix the flaky parser test\nreply:ok")
	if got := title(sid); got != "Fix the flaky parser test" {
		t.Fatalf("title after the first prompt = %q", got)
	}
	send(sid, "title:Something else\nreply:ok")
	if got := title(sid); got != "Fix the flaky parser test" {
		t.Errorf("the second prompt changed the title to %q", got)
	}
	mine := session("mine")
	send(mine, "title:Generated\nreply:ok")
	if got := title(mine); got != "mine" {
		t.Errorf("a title set by a person was replaced by %q", got)
	}
	if got := small.requested(); len(got) != 1 || got[0] != "title:Fix the flaky parser test\nreply:ok" {
		t.Errorf("title requests to the small model: %q, want only the first prompt's", got)
	}
	if got := big.requested(); len(got) != 0 {
		t.Errorf("title requests to the run's model: %q", got)
	}
}
