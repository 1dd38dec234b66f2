// Package engine runs agent loops. It admits prompts into durable runs,
// executes each run (model step, tool calls, model step …), writes every
// change together with the events that describe it, and ends every run
// exactly once with an outcome.
//
// Status is never kept here: it is derived from the run rows in the store.
// The engine's in-memory state is only what it must hold to act — cancel
// functions of the runs executing in this process.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/agentd/agentd/internal/agent"
	"github.com/agentd/agentd/internal/asks"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/events"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/metrics"
	"github.com/agentd/agentd/internal/modelview"
	"github.com/agentd/agentd/internal/pause"
	"github.com/agentd/agentd/internal/plugin"
	"github.com/agentd/agentd/internal/sandbox"
	"github.com/agentd/agentd/internal/snapshot"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/title"
	"github.com/agentd/agentd/internal/tool"
	"github.com/agentd/agentd/internal/undo"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Models resolves a model reference to a provider and what agentd knows
// of the model (its provider-side name, limits, price, options).
type Models interface {
	Resolve(ref core.ModelRef) (llm.Provider, llm.Model, error)
}

// RetryPolicy bounds retries of retryable provider errors.
type RetryPolicy struct {
	MaxAttempts int           // total tries of one step; default 6
	MaxElapsed  time.Duration // default 10 min
	Base        time.Duration // first backoff; default 2 s
	Cap         time.Duration // longest backoff; default 30 s
}

// Config tunes the engine.
type Config struct {
	MaxSteps      int           // default 50
	FlushInterval time.Duration // streamed text is persisted at least this often; default 250 ms
	// WriteQueue, when set, says how many transactions wait for the
	// store's one writer (SQLite's committer). While it is long, writes
	// that only keep readers current wait longer (see flushInterval):
	// committed apart they would lengthen the queue they wait in.
	WriteQueue   func() int
	Retry        RetryPolicy
	DefaultModel core.ModelRef
	// Resume makes Start resume runs cut off by a crash or restart; when
	// false they end interrupted with reason server_restart.
	Resume bool
	// Pause holds runs cut off by a restart for an explicit resume.
	Pause pause.Policy
	// MaxResumes ends a run failed/crash_loop when it has been resumed more
	// often than this without completing a step; default 3.
	MaxResumes int
	// ShutdownGrace bounds how long Stop waits for runs to reach a safe
	// boundary; default 5 s.
	ShutdownGrace time.Duration
	// Permission rules from the configuration, applied after the defaults
	// and before each session's own rules.
	Permission []core.Rule
	// Agents a prompt may name; nil means the built-in ones.
	Agents *agent.Set
	// Instructions are the configuration's instruction files and globs;
	// GlobalDir holds the user's own AGENTS.md.
	Instructions []string
	GlobalDir    string
	// SmallModel writes session titles; nil means the run's model.
	SmallModel *core.ModelRef
	// ToolEnv is the environment of tool processes (nil: the server's
	// variables tool.Base allows).
	ToolEnv *tool.Env
	// Sandbox confines tool processes (nil: unconfined).
	Sandbox *sandbox.Sandbox
	// Snapshots records the workspace at each step (nil: not at all).
	Snapshots *snapshot.Store
	// Questions offers the question tool (the model asks the user); off
	// by default, since a client that never answers leaves the run
	// waiting.
	Questions bool
	// Asks ends asks nobody answers in time (package asks).
	Asks asks.Policy
	// OutputDir keeps the full output of tool calls whose output was cut,
	// one folder per session, which only that session's tools may read
	// without asking (default: a private temporary folder).
	OutputDir string
	// ToolScope names the database to the tools, which mark the processes
	// they start with it (see builtin.Sweep).
	ToolScope string
	// StoragePause is how long a run waits before it retries after the
	// storage refused one of its writes (a full disk): Base first, doubling
	// up to Cap; defaults 250 ms and 30 s.
	StoragePause struct{ Base, Cap time.Duration }
	// Leaser, when set, is the store's lease side: several nodes share the
	// database, and this node claims the runs it executes (see lease.go).
	Leaser store.Leaser
	// LeaseTTL is how long a claimed run stays this node's without a
	// renewal (default 15 s); LeaseRenew how often leases are renewed
	// (default 5 s); ClaimPoll how often runs nobody holds are looked for
	// (default 1 s).
	LeaseTTL   time.Duration
	LeaseRenew time.Duration
	ClaimPoll  time.Duration
	Logger     *slog.Logger
	// Metrics, when set, counts what the engine does (see package metrics).
	Metrics *metrics.Metrics
	// Tracer, when set, records a span per run, step, model call and tool
	// call; nil records nothing.
	Tracer trace.Tracer
	// Budget, when set, is asked before each model call of a run whether
	// its session may spend more (package budget), given what the run
	// has spent so far: an error to end the run with (failed,
	// budget_exceeded), or nil.
	Budget interface {
		Check(ctx context.Context, sessionID string, run core.Spend) (*core.Error, error)
	}
	// CheckHistory makes every step compare the transcript its run keeps
	// from its own writes with the store's, and fail the run when they
	// differ (see own.go). It costs a read of the run's messages a step:
	// for tests.
	CheckHistory bool
	// Hooks are the plugins' hooks (package plugin), called at opencode's
	// call points; nil: none.
	Hooks plugin.Hooks
}

func (c *Config) setDefaults() {
	if c.Tracer == nil {
		c.Tracer = noop.NewTracerProvider().Tracer("")
	}
	if c.MaxSteps <= 0 {
		c.MaxSteps = 50
	}
	if c.FlushInterval <= 0 {
		c.FlushInterval = 250 * time.Millisecond
	}
	if c.Retry.MaxAttempts <= 0 {
		c.Retry.MaxAttempts = 6
	}
	if c.Retry.MaxElapsed <= 0 {
		c.Retry.MaxElapsed = 10 * time.Minute
	}
	if c.Retry.Base <= 0 {
		c.Retry.Base = 2 * time.Second
	}
	if c.Retry.Cap <= 0 {
		c.Retry.Cap = 30 * time.Second
	}
	if c.MaxResumes <= 0 {
		c.MaxResumes = 3
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = 5 * time.Second
	}
	if c.DefaultModel.ProviderID == "" {
		c.DefaultModel = core.ModelRef{ProviderID: "agentd", ModelID: "scripted"}
	}
	if c.StoragePause.Base <= 0 {
		c.StoragePause.Base = 250 * time.Millisecond
	}
	if c.StoragePause.Cap <= 0 {
		c.StoragePause.Cap = 30 * time.Second
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = 15 * time.Second
	}
	if c.LeaseRenew <= 0 {
		c.LeaseRenew = c.LeaseTTL / 3
	}
	if c.ClaimPoll <= 0 {
		c.ClaimPoll = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Agents == nil {
		c.Agents = agent.NewSet(agent.Builtins())
	}
	if c.OutputDir == "" {
		if d, err := os.MkdirTemp("", "agentd-tool-output-*"); err == nil {
			c.OutputDir = d
		}
	}
}

// Engine executes runs.
type Engine struct {
	cfg    Config
	st     store.Store
	hub    *events.Hub
	models Models
	tools  *tool.Registry
	// task is the engine's own task tool.
	task *taskTool
	log  *slog.Logger
	// undo reverts and unreverts sessions' files (package undo).
	undo *undo.Reverter
	// titles writes sessions' titles (package title).
	titles *title.Writer

	mu       sync.Mutex
	started  bool
	closing  bool
	handles  map[string]*handle     // runs executing here, by run id
	aborts   map[string]*abortCause // runs an abort waits on: each execution starts cancelled
	sessions map[string]*executor   // sessions with a local executor
	waiters  map[string]*waiter     // run id → waiters for its end
	leases   map[string]*leaseState // run id → lease held, with a Leaser
	// admissions holds the span of the request that admitted a run, until
	// the run starts here (see observe.go).
	admissions map[string]trace.SpanContext
	baseCtx    context.Context
	cancel     context.CancelCauseFunc
	history    modelview.Cache
	// snapshotWarned holds the workspaces (and kinds of failure) whose
	// snapshot failure was logged.
	snapshotWarned sync.Map
	wg             sync.WaitGroup // drive goroutines
	bg             sync.WaitGroup // the lease loop
	stopOnce       sync.Once
}

// executor is the state of a session's drive goroutine.
type executor struct {
	// again is set when a run is kicked while the executor looks for the
	// next one: its read of the store may predate that run, so it must
	// look once more before it gives up.
	again bool
}

type handle struct {
	run    string
	cancel context.CancelCauseFunc
	done   chan struct{}
}

type waiter struct {
	ch   chan struct{}
	refs int
}

// errShutdown is the cancel cause of runs stopped by a graceful shutdown;
// they stay non-terminal so that the next start resumes them.
var errShutdown = errors.New("server shutting down")

// New returns an engine. Call Start before admitting prompts.
func New(st store.Store, hub *events.Hub, models Models, tools *tool.Registry, cfg Config) *Engine {
	cfg.setDefaults()
	if cfg.Hooks == nil {
		cfg.Hooks = plugin.None{}
	}
	if tools == nil {
		tools = tool.NewRegistry()
	}
	e := &Engine{
		cfg: cfg, st: st, hub: hub, models: models, tools: tools,
		log:      cfg.Logger.With("component", "engine"),
		handles:  make(map[string]*handle),
		sessions: make(map[string]*executor),
		waiters:  make(map[string]*waiter),
		leases:   make(map[string]*leaseState),
	}
	e.task = &taskTool{e: e}
	e.titles = title.New(st, models, cfg.SmallModel, e.log)
	e.titles.Choose = cfg.Hooks.SmallModel
	e.titles.Prepare = func(ctx context.Context, sess core.Session, model core.ModelRef, req *llm.Request) error {
		return cfg.Hooks.Request(ctx, plugin.StepInput{SessionID: sess.ID, Directory: sess.Directory, Agent: "title", Model: model}, req)
	}
	uo := undo.Options{Store: st, Snapshots: cfg.Snapshots, Shared: cfg.Leaser != nil, Grace: cfg.ShutdownGrace, Logger: cfg.Logger,
		Changed: e.summarizeSession}
	if cfg.Leaser != nil {
		uo.Node = cfg.Leaser.Node()
	}
	e.undo = undo.New(uo)
	return e
}

// Start recovers runs left non-terminal by a previous process, then begins
// executing. It returns once recovery has been written, so a server that
// starts listening afterwards never reports a stale status.
func (e *Engine) Start(ctx context.Context) error {
	e.mu.Lock()
	if e.started {
		e.mu.Unlock()
		return errors.New("engine already started")
	}
	e.started = true
	e.baseCtx, e.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	e.mu.Unlock()
	e.titles.Start(e.baseCtx)
	// Reverts cut off by a crash are finished or rolled back first: no
	// run can be active in a session with one.
	if err := e.undo.Start(ctx); err != nil {
		return err
	}
	if e.cfg.Leaser != nil {
		// Other nodes may be executing runs: nothing is recovered wholesale.
		// Runs nobody holds are claimed one by one, here and then every
		// ClaimPoll, each through the same repair as a restart.
		e.cfg.Leaser.OnAbort(e.abortRequested)
		e.claimIdle()
		e.bg.Add(2)
		go e.leaseLoop()
		go e.expireLoop()
		return nil
	}
	sessions, err := e.recover(ctx)
	if err != nil {
		return fmt.Errorf("recover runs: %w", err)
	}
	for _, s := range sessions {
		e.kick(s)
	}
	return nil
}

// Stop stops admitting prompts, asks every local run to reach a safe
// boundary and waits for them (bounded by ShutdownGrace). Runs stopped this
// way stay non-terminal for the next start to resume. Stop is idempotent
// and safe before Start.
func (e *Engine) Stop() {
	e.stopOnce.Do(func() {
		e.mu.Lock()
		e.closing = true
		cancel := e.cancel
		e.mu.Unlock()
		if cancel == nil {
			return
		}
		e.undo.Stop()
		e.mu.Lock()
		held := make([]store.Lease, 0, len(e.leases))
		for _, ls := range e.leases {
			held = append(held, *ls.lease)
		}
		running := make([]string, 0, len(e.handles))
		for id := range e.handles {
			running = append(running, id)
		}
		e.mu.Unlock()
		defer e.logStopped(running, time.Now())
		cancel(errShutdown)
		done := make(chan struct{})
		go func() { e.wg.Wait(); e.titles.Stop(); close(done) }()
		select {
		case <-done:
		case <-time.After(e.cfg.ShutdownGrace):
			// Whatever a run is stuck on, shutdown finishes: the run stays
			// non-terminal and the next start (or another node, once the
			// lease is released: its writes are fenced) resumes it.
			e.log.Warn("runs did not stop within the shutdown grace period; leaving them to the next start")
		}
		e.bg.Wait()
		if e.cfg.Leaser != nil {
			e.releaseAll(held)
		}
	})
}

func (e *Engine) now() int64 { return time.Now().UnixMilli() }

// kick starts the session's next run on this node unless one is already
// executing here.
func (e *Engine) kick(sessionID string) {
	e.mu.Lock()
	if x := e.sessions[sessionID]; x != nil {
		x.again = true
		e.mu.Unlock()
		return
	}
	if e.closing || !e.started {
		e.mu.Unlock()
		return
	}
	e.sessions[sessionID] = &executor{}
	e.wg.Add(1)
	e.mu.Unlock()
	go e.drive(sessionID)
}

// drive executes the session's non-terminal runs one after another. A run
// the storage stopped (a full disk) is not failed for it: the session
// pauses, longer each time, and takes the run up again from what was
// written, until the storage accepts writes again.
func (e *Engine) drive(sessionID string) {
	defer e.wg.Done()
	pauses := 0
	stalled := "" // the run the storage stopped, to repair before it goes on
	defer func() {
		if stalled != "" {
			e.dropLease(stalled)
		}
	}()
	for {
		run, ok := e.nextRun(sessionID, &pauses)
		if !ok {
			return
		}
		if stalled != "" && run.ID != stalled {
			// Ended meanwhile (by a client, or by the node that took it).
			e.dropLease(stalled)
			stalled = ""
		}
		var lease *store.Lease
		if l := e.heldLease(run.ID); l != nil && run.ID == stalled {
			// The storage stall was shorter than the lease: the run is
			// still this node's, with no other node's claim to wait for.
			lease = l
		} else if e.cfg.Leaser != nil {
			l, res, err := e.claim(run)
			if err != nil {
				pauses++
				e.pause(pauses, "run", run.ID, "err", err)
				continue
			}
			if res == claimEnded {
				continue
			}
			if res == claimTaken {
				// Another node executes the session's run; when it ends,
				// that node goes on with the session.
				e.mu.Lock()
				delete(e.sessions, sessionID)
				e.mu.Unlock()
				return
			}
			lease = l
		}
		if run.ID == stalled {
			if err := e.repairStalled(run, lease); err != nil {
				pauses++
				e.pause(pauses, "run", run.ID, "err", err)
				continue
			}
			stalled = ""
		}
		if err := e.execute(run, lease); err != nil {
			stalled = run.ID
			pauses++
			e.pause(pauses, "run", run.ID, "err", err)
			continue
		}
		if lease != nil {
			e.dropLease(run.ID)
		}
		stalled = ""
		pauses = 0
	}
}

// pause waits before the n-th retry after a storage failure: StoragePause
// Base, doubling up to Cap. It returns early when the engine stops.
func (e *Engine) pause(n int, logArgs ...any) {
	d := e.cfg.StoragePause.Base
	for i := 1; i < n && d < e.cfg.StoragePause.Cap; i++ {
		d *= 2
	}
	d = min(d, e.cfg.StoragePause.Cap)
	// The state change is logged once by the store's watcher; each pause
	// only at debug level.
	e.log.Debug("paused by storage", append(logArgs, "attempt", n, "delay", d)...)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-e.baseCtx.Done():
	}
}

// nextRun returns the session's oldest non-terminal run, or releases the
// session and returns false when there is none (or the engine is closing).
// A failed read pauses and tries again: dropping the session would leave
// its runs unexecuted until the next start.
func (e *Engine) nextRun(sessionID string, pauses *int) (core.Run, bool) {
	for {
		e.mu.Lock()
		x := e.sessions[sessionID]
		x.again = false
		e.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		runs, err := e.st.ActiveRuns(ctx, sessionID)
		cancel()
		e.mu.Lock()
		if err != nil && !e.closing {
			e.mu.Unlock()
			*pauses++
			if *pauses == 1 {
				e.log.Error("list active runs", "session", sessionID, "err", err)
			}
			e.pause(*pauses, "session", sessionID, "err", err)
			continue
		}
		if err == nil && len(runs) == 0 && x.again && !e.closing {
			// A run was admitted after the read began; read again.
			e.mu.Unlock()
			continue
		}
		if err != nil || len(runs) == 0 || e.closing {
			delete(e.sessions, sessionID)
			e.mu.Unlock()
			return core.Run{}, false
		}
		e.mu.Unlock()
		if runs[0].Phase == core.PhasePaused {
			e.mu.Lock()
			delete(e.sessions, sessionID) // until POST /session/{id}/resume
			e.mu.Unlock()
			return core.Run{}, false
		}
		return runs[0], true
	}
}

// register makes a run abortable locally.
func (e *Engine) register(runID string) (context.Context, *handle) {
	ctx, cancel := context.WithCancelCause(e.baseCtx)
	h := &handle{run: runID, cancel: cancel, done: make(chan struct{})}
	e.mu.Lock()
	if ab := e.aborts[runID]; ab != nil {
		cancel(ab)
	}
	e.handles[runID] = h
	e.mu.Unlock()
	return ctx, h
}

func (e *Engine) unregister(h *handle) {
	e.mu.Lock()
	delete(e.handles, h.run)
	e.mu.Unlock()
	h.cancel(nil)
	close(h.done)
}

// runEnded wakes everyone waiting for the run.
func (e *Engine) runEnded(runID string) {
	e.mu.Lock()
	if w, ok := e.waiters[runID]; ok {
		close(w.ch)
		delete(e.waiters, runID)
	}
	e.mu.Unlock()
}
