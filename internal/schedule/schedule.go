// Package schedule sends prompts on a cron expression or an interval:
// the durable schedules behind POST /schedule.
//
// A schedule is a row (store.Schedule) holding its spec, the next tick
// not yet claimed and, while a tick is being fired, that tick. Every node
// looks for due ticks every Poll; a node fires a tick only after it has
// claimed it with a conditional update of the row (the stored next tick
// must still be the one it read), so that of the nodes sharing a
// database exactly one fires each tick. The claim records the tick with
// the ids of its message (and new session) before the prompt is sent, so
// that a node that dies in between leaves a pending tick another node (or
// the restarted one) finishes once the claim lapses: it sends the same
// message id, which the engine admits once.
//
// Missed ticks (the cluster was down, or a node was slower than a tick)
// are fired once: the oldest missed tick is fired when found, the number
// of ticks it stands for is recorded as missed, and the cadence resumes at
// the first tick after now. A tick that finds its session with a run
// still going is skipped and recorded (busy "skip", the default), or
// queued behind it (busy "queue").
package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/engine"
	"github.com/agentd/agentd/internal/store"
)

// Prompter admits prompts: the engine, the same path POST
// /session/{id}/prompt_async takes.
type Prompter interface {
	Prompt(ctx context.Context, sessionID string, in engine.PromptInput) (engine.Admission, error)
}

// Config tunes a scheduler; its zero value is the production one.
type Config struct {
	// Now is the clock ticks are judged by (nil: the wall clock).
	Now func() time.Time
	// Poll is how often due ticks are looked for (default 1 s).
	Poll time.Duration
	// ClaimTTL is how long a claimed tick stays the claimer's before
	// another node may fire it (default 1 min).
	ClaimTTL time.Duration
}

// Scheduler fires the schedules of one node.
type Scheduler struct {
	st      store.Store
	eng     Prompter
	cfg     Config
	log     *slog.Logger
	version string

	mu      sync.Mutex
	started bool
	cancel  context.CancelFunc
	done    chan struct{}
}

// New makes a scheduler over the store and engine; version is stored on
// the sessions it makes.
func New(st store.Store, eng Prompter, cfg Config, log *slog.Logger, version string) *Scheduler {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.ClaimTTL <= 0 {
		cfg.ClaimTTL = time.Minute
	}
	if log == nil {
		log = slog.Default()
	}
	return &Scheduler{st: st, eng: eng, cfg: cfg, log: log.With("component", "schedule"), version: version}
}

// Start begins looking for due ticks every Poll until Stop or ctx ends.
// It returns at once; a second Start does nothing.
func (s *Scheduler) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return nil
	}
	s.started = true
	ctx, s.cancel = context.WithCancel(ctx)
	s.done = make(chan struct{})
	go s.loop(ctx)
	return nil
}

// Stop ends the loop and waits for it, a tick being fired included. It
// is idempotent and safe before Start.
func (s *Scheduler) Stop() {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

func (s *Scheduler) loop(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(s.cfg.Poll)
	defer t.Stop()
	for {
		if _, err := s.RunDue(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("fire schedules", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// dueBatch bounds the schedules one pass looks at.
const dueBatch = 100

// RunDue fires what is due now, once: ticks due, and pending ticks whose
// claim lapsed. It returns how many ticks this node fired (sent or
// skipped); ticks other nodes claimed first are not counted.
func (s *Scheduler) RunDue(ctx context.Context) (int, error) {
	now := s.cfg.Now().UnixMilli()
	due, err := s.st.DueSchedules(ctx, now, dueBatch)
	if err != nil {
		return 0, err
	}
	fired := 0
	var errs []error
	for _, row := range due {
		ok, err := s.runOne(ctx, row, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("schedule %s: %w", row.ID, err))
		}
		if ok {
			fired++
		}
	}
	return fired, errors.Join(errs...)
}

// pending is a claimed tick: what firing it sends, fixed before it is
// sent so that whoever fires it sends the same.
type pending struct {
	Tick      int64  `json:"tick"`
	Missed    int    `json:"missed,omitempty"`
	SessionID string `json:"sessionID"`
	MessageID string `json:"messageID"`
}

// maxMissed bounds the count of missed ticks recorded.
const maxMissed = 10000

// runOne claims (or takes over) one schedule's tick and fires it.
func (s *Scheduler) runOne(ctx context.Context, row store.Schedule, now int64) (bool, error) {
	var spec Spec
	if err := json.Unmarshal(row.Spec, &spec); err != nil {
		return false, fmt.Errorf("decode spec: %w", err)
	}
	claim := now + s.cfg.ClaimTTL.Milliseconds()
	var p pending
	if row.Pending != nil {
		if err := json.Unmarshal(row.Pending, &p); err != nil {
			return false, fmt.Errorf("decode pending tick: %w", err)
		}
		err := s.st.Tx(ctx, func(tx store.Tx) error { return tx.TakePending(ctx, row.ID, row.PendingExpires, claim) })
		if err != nil {
			return false, ignoreLost(err)
		}
		s.log.Info("took over a tick whose claim lapsed", "schedule", row.ID, "tick", p.Tick)
	} else {
		cad, err := spec.clock()
		if err != nil {
			return false, err
		}
		p = pending{Tick: row.Next, Missed: cad.missed(row.Created, row.Next, now, maxMissed),
			SessionID: spec.SessionID, MessageID: core.NewID(core.PrefixMessage, false)}
		if spec.NewSession {
			p.SessionID = core.NewID(core.PrefixSession, true)
		}
		data, _ := json.Marshal(p)
		next := cad.after(row.Created, now)
		err = s.st.Tx(ctx, func(tx store.Tx) error { return tx.ClaimTick(ctx, row.ID, row.Next, next, data, claim) })
		if err != nil {
			return false, ignoreLost(err)
		}
	}
	return s.fire(ctx, row.ID, spec, p, claim, now)
}

// ignoreLost drops the error of a claim another node won.
func ignoreLost(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// Tick is the record of a schedule's last tick: when it was due and
// fired, what was sent where, and why nothing was when nothing was.
type Tick struct {
	// Tick is when the tick was due, Time when it was fired (epoch ms).
	Tick int64 `json:"tick"`
	Time int64 `json:"time"`
	// Missed counts the later ticks that had also passed when it fired;
	// they were not fired (see the package's policy).
	Missed    int    `json:"missed,omitempty"`
	SessionID string `json:"sessionID,omitempty"`
	MessageID string `json:"messageID,omitempty"`
	RunID     string `json:"runID,omitempty"`
	// Skipped is "busy" when the session still had a run (busy skip).
	Skipped string `json:"skipped,omitempty"`
	// Error is why the prompt was refused (a session deleted, an agent
	// that no longer exists …).
	Error string `json:"error,omitempty"`
	// Run is the run's state and outcome, read when the schedule is.
	Run *RunOutcome `json:"run,omitempty"`
}

// RunOutcome is the state of the run a tick started and, once it has
// ended, how.
type RunOutcome struct {
	State  core.RunState  `json:"state"`
	Reason core.EndReason `json:"reason,omitempty"`
	Error  *core.Error    `json:"error,omitempty"`
}

// fire sends a claimed tick's prompt and records its outcome. A tick the
// node could not finish (it is stopping, the store failed) stays pending
// for the next pass or another node.
func (s *Scheduler) fire(ctx context.Context, id string, spec Spec, p pending, claim, now int64) (bool, error) {
	last := Tick{Tick: p.Tick, Time: now, Missed: p.Missed, SessionID: p.SessionID, MessageID: p.MessageID}
	adm, err := s.send(ctx, spec, p)
	switch {
	case err == nil:
		last.RunID = adm.RunID
	case errors.Is(err, engine.ErrBusy) || errors.Is(err, engine.ErrSessionBusy):
		last.Skipped = "busy"
	case errors.Is(err, engine.ErrClosed) || ctx.Err() != nil:
		return false, nil
	default:
		var in *engine.InputError
		var conflict *engine.IDConflictError
		if !errors.Is(err, store.ErrNotFound) && !errors.As(err, &in) && !errors.As(err, &conflict) {
			return false, err
		}
		last.Error = err.Error()
	}
	data, _ := json.Marshal(last)
	// The outcome is written even when the node is stopping: the
	// prompt is in, and a tick left pending would be fired again.
	dctx := context.WithoutCancel(ctx)
	err = s.st.Tx(dctx, func(tx store.Tx) error { return tx.FinishTick(dctx, id, claim, data) })
	if err != nil {
		return false, ignoreLost(err)
	}
	s.log.Info("schedule fired", "schedule", id, "tick", p.Tick, "session", last.SessionID, "run", last.RunID,
		"skipped", last.Skipped, "missed", last.Missed, "error", last.Error)
	return true, nil
}

// send admits the tick's prompt, into a session of its own when the
// schedule makes one each time.
func (s *Scheduler) send(ctx context.Context, spec Spec, p pending) (engine.Admission, error) {
	if spec.NewSession {
		if err := s.newSession(ctx, spec, p); err != nil {
			return engine.Admission{}, err
		}
	}
	policy := core.PolicyReject
	if spec.Busy == BusyQueue {
		policy = core.PolicyQueue
	}
	return s.eng.Prompt(ctx, p.SessionID, engine.PromptInput{
		MessageID: p.MessageID, Agent: spec.Agent, Model: spec.Model, Policy: policy,
		Parts: []engine.InputPart{{Type: core.PartText, Text: spec.Prompt}},
	})
}
