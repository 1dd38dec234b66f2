package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/engine"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/llm/scripted"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/tool"
	"github.com/agentd/agentd/internal/tool/builtin"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// node is one running agentd for a test.
type node struct {
	t      *testing.T
	app    *app.App
	c      *client.Client
	cfg    app.Config
	counts *atomic.Int64
}

type option func(*app.Config)

// testTools are tools the scripted model can call in tests: echo returns
// its input's text, count increments a counter (to detect replays), block
// waits until cancelled.
func testTools(counter *atomic.Int64) *tool.Registry {
	return tool.NewRegistry(append(builtin.All(),
		&tool.Func{ToolName: "echo", Desc: "Echo text.", Fn: func(ctx context.Context, c tool.Call) (tool.Result, error) {
			var in struct {
				Text string `json:"text"`
			}
			if err := json.Unmarshal(c.Input, &in); err != nil {
				return tool.Errorf("bad input: " + err.Error()), nil
			}
			return tool.Result{Output: in.Text, Title: "echo"}, nil
		}},
		&tool.Func{ToolName: "count", Desc: "Count calls.", Fn: func(ctx context.Context, c tool.Call) (tool.Result, error) {
			n := counter.Add(1)
			return tool.Result{Output: "count " + itoa(n)}, nil
		}},
		&tool.Func{ToolName: "block", Desc: "Block until cancelled.", Fn: func(ctx context.Context, c tool.Call) (tool.Result, error) {
			<-ctx.Done()
			return tool.Errorf("cancelled"), nil
		}},
	)...)
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startNode starts agentd on a fresh database (or dbPath when set through
// withDB) and stops it when the test ends.
func startNode(t *testing.T, opts ...option) *node {
	t.Helper()
	counter := &atomic.Int64{}
	models := llm.NewRegistry()
	models.Add(scripted.ProviderID, &scripted.Model{Second: 20 * time.Millisecond}, nil)
	cfg := app.Config{
		DBPath: filepath.Join(t.TempDir(), "agentd.db"), Host: "127.0.0.1", Port: 0,
		Version: "test", Directory: t.TempDir(), Models: models, Tools: testTools(counter),
		Logger: quietLogger(), Heartbeat: time.Hour,
	}
	cfg.Security.LoopbackOnly = true
	// The tests drive bash through the scripted model; an operator allows
	// it the same way (bash asks by default).
	cfg.Engine.Permission = []core.Rule{{Permission: "bash", Pattern: "*", Action: core.ActionAllow}}
	cfg.Engine.Resume = true
	cfg.Engine.Retry = fastRetry()
	cfg.Engine.CheckHistory = true
	for _, o := range opts {
		o(&cfg)
	}
	if app.IsPostgres(cfg.DBPath) && cfg.CredentialsFile == "" {
		// Not the user's own, which a node on PostgreSQL imports.
		cfg.CredentialsFile = filepath.Join(t.TempDir(), "credentials.json")
	}
	return startWith(t, cfg, counter)
}

func fastRetry() engine.RetryPolicy {
	return engine.RetryPolicy{MaxAttempts: 4, MaxElapsed: time.Minute, Base: 5 * time.Millisecond, Cap: 20 * time.Millisecond}
}

func startWith(t *testing.T, cfg app.Config, counter *atomic.Int64) *node {
	t.Helper()
	a, err := app.Start(t.Context(), cfg)
	if err != nil {
		t.Fatalf("start agentd: %v", err)
	}
	n := &node{t: t, app: a, c: client.New(a.URL()), cfg: cfg, counts: counter}
	t.Cleanup(func() { n.stop() })
	return n
}

func (n *node) stop() {
	// A request cancelled while its connection was being dialled leaves
	// the connection in the client's pool without ever sending on it; the
	// server's Shutdown counts such a connection as active for 5 s.
	n.c.HTTPClient().CloseIdleConnections()
	if err := n.app.Stop(context.Background()); err != nil {
		n.t.Errorf("stop: %v", err)
	}
}

// restart stops the node and starts another on the same database.
func (n *node) restart(opts ...option) *node {
	n.stop()
	cfg := n.cfg
	for _, o := range opts {
		o(&cfg)
	}
	return startWith(n.t, cfg, n.counts)
}

func (n *node) session() string {
	n.t.Helper()
	s, err := n.c.CreateSession(n.t.Context(), "", "")
	if err != nil {
		n.t.Fatal(err)
	}
	return s.ID
}

// send prompts and returns the run's last assistant message. A run that
// fails is answered with its error (5xx); send then reads the message
// from the transcript, so that tests look at failures the same way.
func (n *node) send(sid, text string) client.MessageWithParts {
	n.t.Helper()
	m, err := n.c.Send(n.t.Context(), sid, client.Prompt{Text: text})
	var ce *client.Error
	if errors.As(err, &ce) && ce.StatusCode >= 500 {
		msgs, lerr := n.c.Messages(n.t.Context(), sid)
		if lerr != nil {
			n.t.Fatal(lerr)
		}
		for i := len(msgs) - 1; i >= 0; i-- {
			if msgs[i].Info.Role == core.RoleAssistant {
				return msgs[i]
			}
		}
	}
	if err != nil {
		n.t.Fatalf("send %q: %v", text, err)
	}
	return m
}

func (n *node) status(sid string) core.SessionStatus {
	n.t.Helper()
	st, err := n.c.Status(n.t.Context(), sid)
	if err != nil {
		n.t.Fatal(err)
	}
	return st
}

// waitIdle waits for the session to be idle and returns its status.
func (n *node) waitIdle(sid string) core.SessionStatus {
	n.t.Helper()
	st, err := n.c.Wait(n.t.Context(), sid, "", time.Minute)
	if err != nil {
		n.t.Fatalf("wait %s: %v", sid, err)
	}
	return st
}

// waitFor blocks until the session's status satisfies ok, following the
// durable event log rather than polling on a timer.
func (n *node) waitFor(sid string, ok func(core.SessionStatus) bool) core.SessionStatus {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(n.t.Context(), 30*time.Second)
	defer cancel()
	for {
		_, changed := n.app.Hub.Head()
		st, err := n.app.Store.SessionStatus(ctx, sid)
		if err != nil {
			n.t.Fatal(err)
		}
		if ok(st) {
			return st
		}
		select {
		case <-changed:
		case <-ctx.Done():
			n.t.Fatalf("session %s never reached the wanted status; last %+v", sid, st)
		}
	}
}

// allEvents returns the whole durable log.
func (n *node) allEvents() []core.Event {
	n.t.Helper()
	var out []core.Event
	var after int64
	for {
		evs, err := n.app.Store.Events(n.t.Context(), store.EventQuery{After: after, Limit: 5000})
		if err != nil {
			n.t.Fatal(err)
		}
		out = append(out, evs...)
		if len(evs) < 5000 {
			return out
		}
		after = evs[len(evs)-1].Seq
	}
}

func textOf(m client.MessageWithParts) string {
	var s string
	for _, p := range m.Parts {
		if p.Type == core.PartText {
			s += p.Text
		}
	}
	return s
}

func partOf(m client.MessageWithParts, typ core.PartType) *core.Part {
	for i := range m.Parts {
		if m.Parts[i].Type == typ {
			return &m.Parts[i]
		}
	}
	return nil
}

// waitToolRunning blocks until the session has a tool part in the running
// state.
func (n *node) waitToolRunning(sid string) {
	n.t.Helper()
	n.waitTranscript(sid, func(msgs []core.MessageWithParts) bool {
		for _, m := range msgs {
			for _, p := range m.Parts {
				if p.Type == core.PartTool && p.State.Status == core.ToolRunning {
					return true
				}
			}
		}
		return false
	})
}

// waitForMessages blocks until the session has count messages of role.
func (n *node) waitForMessages(sid string, count int, role string) {
	n.t.Helper()
	n.waitTranscript(sid, func(msgs []core.MessageWithParts) bool {
		c := 0
		for _, m := range msgs {
			if m.Info.Role == role {
				c++
			}
		}
		return c >= count
	})
}

// waitTranscript blocks until ok holds for the session's transcript,
// re-checking whenever the event log moves.
func (n *node) waitTranscript(sid string, ok func([]core.MessageWithParts) bool) {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(n.t.Context(), 30*time.Second)
	defer cancel()
	for {
		_, changed := n.app.Hub.Head()
		msgs, err := n.app.Store.Messages(ctx, sid, store.MessageQuery{})
		if err != nil {
			n.t.Fatal(err)
		}
		if ok(msgs) {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			n.t.Fatalf("transcript of %s never reached the wanted state", sid)
		}
	}
}

// waitTitle blocks until the session's title is want. A session's first
// prompt writes its title from a goroutine of its own, whose commit a test
// counting commits or events must not mistake for the turn's.
func (n *node) waitTitle(sid, want string) {
	n.t.Helper()
	n.waitTranscript(sid, func([]core.MessageWithParts) bool {
		s, err := n.app.Store.Session(n.t.Context(), sid)
		return err == nil && s.Title == want
	})
}
