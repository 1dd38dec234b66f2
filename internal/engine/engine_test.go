package engine_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/engine"
	"github.com/agentd/agentd/internal/events"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/llm/scripted"
	"github.com/agentd/agentd/internal/sandbox"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/sqlite"
	"github.com/agentd/agentd/internal/store/storetest"
	"github.com/agentd/agentd/internal/tool"
	"github.com/agentd/agentd/internal/tool/builtin"
)

// The engine at its own level: a real SQLite file (a few milliseconds a
// test), the scripted model and the built-in tools, no HTTP. A failure
// here points at the engine, not at the layers around it.

type node struct {
	t    *testing.T
	path string
	st   *sqlite.Store
	e    *engine.Engine
	dir  string
}

func startEngine(t *testing.T, path, dir string, set func(*engine.Config)) *node {
	t.Helper()
	st, err := sqlite.Open(t.Context(), path, sqlite.Options{Synchronous: "OFF"})
	if err != nil {
		t.Fatal(err)
	}
	_, last, err := st.EventBounds(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	hub := events.NewHub(st, last, 0)
	st.SetCommitHook(hub.Publish)
	models := llm.NewRegistry()
	models.Add(scripted.ProviderID, &scripted.Model{Second: 10 * time.Millisecond}, nil)
	cfg := engine.Config{
		DefaultModel: core.ModelRef{ProviderID: scripted.ProviderID, ModelID: scripted.ModelID},
		Resume:       true, Logger: slog.New(slog.DiscardHandler), OutputDir: t.TempDir(), CheckHistory: true,
		Permission: []core.Rule{{Permission: "bash", Pattern: "echo *", Action: core.ActionAllow}},
	}
	cfg.Retry = engine.RetryPolicy{MaxAttempts: 3, Base: time.Millisecond, Cap: 2 * time.Millisecond}
	// Tools run confined as a server's do, where the kernel can.
	cfg.Sandbox, err = sandbox.New(sandbox.Config{Hidden: []string{filepath.Dir(path)}})
	if err != nil {
		t.Fatal(err)
	}
	if set != nil {
		set(&cfg)
	}
	e := engine.New(st, hub, models, tool.NewRegistry(builtin.All()...), cfg)
	if err := e.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	n := &node{t: t, path: path, st: st, e: e, dir: dir}
	t.Cleanup(n.stop)
	return n
}

func (n *node) stop() {
	n.e.Stop()
	n.st.Close()
}

func newNode(t *testing.T, set func(*engine.Config)) *node {
	dir := t.TempDir()
	return startEngine(t, filepath.Join(t.TempDir(), "agentd.db"), dir, set)
}

func (n *node) session() string {
	n.t.Helper()
	s := storetest.NewSession(n.dir, time.Now().UnixMilli())
	if err := n.st.Tx(n.t.Context(), func(tx store.Tx) error { return tx.InsertSession(n.t.Context(), s) }); err != nil {
		n.t.Fatal(err)
	}
	return s.ID
}

// run admits a prompt and waits for its run to end.
func (n *node) run(sessionID, text string) core.Run {
	n.t.Helper()
	adm, err := n.e.Prompt(n.t.Context(), sessionID, engine.PromptInput{Parts: []engine.InputPart{{Type: core.PartText, Text: text}}})
	if err != nil {
		n.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(n.t.Context(), 30*time.Second)
	defer cancel()
	run, err := n.e.WaitRun(ctx, adm.RunID)
	if err != nil {
		n.t.Fatal(err)
	}
	return run
}

// TestOutcomes: how a run ends, for each way it can.
func TestOutcomes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		prompt string
		set    func(*engine.Config)
		state  core.RunState
		reason core.EndReason
		steps  int
	}{
		{"an answer", "reply:hi", nil, core.RunSucceeded, "", 1},
		{"a tool, then the answer", `tool:list:{}` + "\nreply:listed", nil, core.RunSucceeded, "", 2},
		{"an allowed command", `tool:bash:{"command":"echo hi"}` + "\nreply:ran", nil, core.RunSucceeded, "", 2},
		{"a refusal of the provider", "fail:400", nil, core.RunFailed, core.ReasonProviderError, 1},
		{"retries that run out", "fail:429", nil, core.RunFailed, core.ReasonRetriesExhausted, 1},
		{"a retry that succeeds", "fail:503x1\nreply:second try", nil, core.RunSucceeded, "", 1},
		{"the step budget", `loop:list:{}`, func(c *engine.Config) { c.MaxSteps = 2 }, core.RunFailed, core.ReasonMaxSteps, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			n := newNode(t, c.set)
			run := n.run(n.session(), c.prompt)
			if run.State != c.state || run.Reason != c.reason || run.Steps != c.steps {
				t.Errorf("run ended %s/%s after %d steps, want %s/%s after %d (error %v)",
					run.State, run.Reason, run.Steps, c.state, c.reason, c.steps, run.Error)
			}
			st, err := n.st.SessionStatus(t.Context(), run.SessionID)
			if err != nil || st.Type != core.StatusIdle || st.Last == nil || st.Last.RunID != run.ID || st.Last.Outcome != c.state {
				t.Errorf("status after the run: %+v, %v", st, err)
			}
		})
	}
}

// TestAbortWhileWaitingForPermission: an ask nobody answers holds the run
// (busy, waiting_permission) until an abort ends it interrupted/aborted.
func TestAbortWhileWaitingForPermission(t *testing.T) {
	t.Parallel()
	n := newNode(t, nil)
	sid := n.session()
	adm, err := n.e.Prompt(t.Context(), sid, engine.PromptInput{Parts: []engine.InputPart{{Type: core.PartText,
		Text: `tool:bash:{"command":"rm -rf nothing"}` + "\nreply:x"}}})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		st, _ := n.st.SessionStatus(t.Context(), sid)
		if st.Phase == core.PhaseWaitingPermission {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never waited for permission: %+v", st)
		}
	}
	if ok, err := n.e.Abort(t.Context(), sid); !ok || err != nil {
		t.Fatalf("abort: %v %v", ok, err)
	}
	run, err := n.e.WaitRun(t.Context(), adm.RunID)
	if err != nil || run.State != core.RunInterrupted || run.Reason != core.ReasonAborted {
		t.Errorf("after the abort: %s/%s %v", run.State, run.Reason, err)
	}
	pending, _ := n.st.PendingPermissions(t.Context(), sid)
	if len(pending) != 0 {
		t.Errorf("%d permission requests still pending after the run ended", len(pending))
	}
}

// cutOff leaves, as a crash would, a running run whose bash call was
// running, then starts an engine on the database.
func cutOff(t *testing.T, resumes int, set func(*engine.Config)) (*node, core.Run) {
	t.Helper()
	dir, path := t.TempDir(), filepath.Join(t.TempDir(), "agentd.db")
	st, err := sqlite.Open(t.Context(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	sess := storetest.NewSession(dir, now)
	user := core.Message{ID: core.NewID(core.PrefixMessage, false), SessionID: sess.ID, Role: core.RoleUser, Created: now,
		Model: core.ModelRef{ProviderID: scripted.ProviderID, ModelID: scripted.ModelID}, Agent: "build"}
	run := core.Run{ID: core.NewID(core.PrefixRun, false), SessionID: sess.ID, State: core.RunRunning, UserMessageID: user.ID,
		Model: user.Model, Agent: "build", Steps: 1, Resumes: resumes, Time: core.RunTime{Created: now, Started: now}}
	user.RunID = run.ID
	asst := core.Message{ID: core.NewID(core.PrefixMessage, false), SessionID: sess.ID, Role: core.RoleAssistant, Created: now,
		ParentID: user.ID, RunID: run.ID, ModelID: scripted.ModelID, ProviderID: scripted.ProviderID, Agent: "build", Mode: "build"}
	call := core.Part{ID: core.NewID(core.PrefixPart, false), SessionID: sess.ID, MessageID: asst.ID, Type: core.PartTool,
		CallID: "call_1", Tool: "bash", State: core.ToolState{Status: core.ToolRunning,
			Input: json.RawMessage(`{"command":"echo cut"}`), Time: core.PartTime{Start: now}}}
	err = st.Tx(t.Context(), func(tx store.Tx) error {
		ctx := t.Context()
		return errorsJoin(tx.InsertSession(ctx, sess), tx.InsertMessage(ctx, user),
			tx.PutPart(ctx, core.Part{ID: core.NewID(core.PrefixPart, false), SessionID: sess.ID, MessageID: user.ID,
				Type: core.PartText, Text: "reply:after the restart"}),
			tx.InsertRun(ctx, run), tx.InsertMessage(ctx, asst), tx.PutPart(ctx, call))
	})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	return startEngine(t, path, dir, set), run
}

func errorsJoin(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// TestRecovery: what a start does with a run a crash cut off in the
// middle of a tool call: the call is an error whose outcome is unknown
// (never run again), and the run resumes; or, with resumption off, ends
// interrupted/server_restart; or, resumed too often, failed/crash_loop.
func TestRecovery(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		resumes int
		set     func(*engine.Config)
		state   core.RunState
		reason  core.EndReason
	}{
		{"resumed", 0, nil, core.RunSucceeded, ""},
		{"resumption off", 0, func(c *engine.Config) { c.Resume = false }, core.RunInterrupted, core.ReasonServerRestart},
		{"a crash loop", 3, nil, core.RunFailed, core.ReasonCrashLoop},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			n, cut := cutOff(t, c.resumes, c.set)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			run, err := n.e.WaitRun(ctx, cut.ID)
			if err != nil || run.State != c.state || run.Reason != c.reason {
				t.Fatalf("recovered run: %s/%s %v, want %s/%s", run.State, run.Reason, err, c.state, c.reason)
			}
			msgs, err := n.st.Messages(t.Context(), cut.SessionID, store.MessageQuery{})
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs {
				for _, p := range m.Parts {
					if p.CallID == "call_1" && (p.State.Status != core.ToolError || p.State.Metadata["interrupted"] != true) {
						t.Errorf("the cut-off call: %+v (want an error, outcome unknown)", p.State)
					}
				}
			}
		})
	}
}
