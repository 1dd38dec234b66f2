package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// PrefixSchedule starts a schedule's id.
const PrefixSchedule = "sch"

// InputError is a spec the scheduler refuses; the API answers 400.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }

// Unwrap returns the reason.
func (e *InputError) Unwrap() error { return e.Err }

// Schedule is a schedule as the API shows it: its spec, its next tick and
// its last one with the outcome of the run it started.
type Schedule struct {
	ID string `json:"id"`
	Spec
	Time struct {
		Created int64 `json:"created"`
	} `json:"time"`
	// Next is when the next tick is due (epoch ms); absent when the
	// schedule will not fire again.
	Next int64 `json:"next,omitempty"`
	// Firing is true while a claimed tick is being sent.
	Firing bool  `json:"firing,omitempty"`
	Last   *Tick `json:"last,omitempty"`
}

// Create checks and stores a new schedule; its first tick is the first
// one after now. A schedule for an existing session must name one that
// exists.
func (s *Scheduler) Create(ctx context.Context, spec Spec) (Schedule, error) {
	if err := spec.Check(); err != nil {
		return Schedule{}, &InputError{err}
	}
	cad, _ := spec.clock()
	now := s.cfg.Now().UnixMilli()
	row := store.Schedule{ID: core.NewID(PrefixSchedule, false), Created: now, Next: cad.after(now, now)}
	if row.Next == 0 {
		return Schedule{}, &InputError{errors.New("cron: the expression does not fire in the years ahead")}
	}
	var err error
	if row.Spec, err = json.Marshal(spec); err != nil {
		return Schedule{}, fmt.Errorf("encode schedule: %w", err)
	}
	err = s.st.Tx(ctx, func(tx store.Tx) error {
		if spec.SessionID != "" {
			if _, err := tx.Session(ctx, spec.SessionID); errors.Is(err, store.ErrNotFound) {
				return &InputError{fmt.Errorf("sessionID: session %s does not exist", spec.SessionID)}
			} else if err != nil {
				return err
			}
		}
		return tx.InsertSchedule(ctx, row)
	})
	if err != nil {
		return Schedule{}, err
	}
	return s.view(ctx, row)
}

// Get returns one schedule; store.ErrNotFound when there is none.
func (s *Scheduler) Get(ctx context.Context, id string) (Schedule, error) {
	row, err := s.st.Schedule(ctx, id)
	if err != nil {
		return Schedule{}, err
	}
	return s.view(ctx, row)
}

// List returns every schedule, oldest first.
func (s *Scheduler) List(ctx context.Context) ([]Schedule, error) {
	rows, err := s.st.Schedules(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Schedule, 0, len(rows))
	for _, row := range rows {
		v, err := s.view(ctx, row)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// Delete removes a schedule: no tick fires after it returns (one being
// sent at that moment may still land). store.ErrNotFound when there is
// none.
func (s *Scheduler) Delete(ctx context.Context, id string) error {
	return s.st.Tx(ctx, func(tx store.Tx) error { return tx.DeleteSchedule(ctx, id) })
}

// view reads the row for the API, with the last run's state.
func (s *Scheduler) view(ctx context.Context, row store.Schedule) (Schedule, error) {
	v := Schedule{ID: row.ID, Next: row.Next, Firing: row.Pending != nil}
	v.Time.Created = row.Created
	if err := json.Unmarshal(row.Spec, &v.Spec); err != nil {
		return v, fmt.Errorf("decode schedule %s: %w", row.ID, err)
	}
	if row.Last == nil {
		return v, nil
	}
	v.Last = new(Tick)
	if err := json.Unmarshal(row.Last, v.Last); err != nil {
		return v, fmt.Errorf("decode schedule %s: %w", row.ID, err)
	}
	if v.Last.RunID == "" {
		return v, nil
	}
	run, err := s.st.Run(ctx, v.Last.RunID)
	switch {
	case err == nil:
		v.Last.Run = &RunOutcome{State: run.State, Reason: run.Reason, Error: run.Error}
	case !errors.Is(err, store.ErrNotFound): // a deleted session takes its runs with it
		return v, err
	}
	return v, nil
}

// newSession makes the tick's own session, unless an earlier attempt at
// the same tick already did.
func (s *Scheduler) newSession(ctx context.Context, spec Spec, p pending) error {
	now := s.cfg.Now()
	title := spec.Name
	if title == "" {
		title = strings.Join(strings.Fields(spec.Prompt), " ")
		if r := []rune(title); len(r) > 60 {
			title = string(r[:60]) + "…"
		}
	}
	sess := core.Session{
		ID: p.SessionID, Slug: core.Slug(p.SessionID), ProjectID: "global", Directory: spec.Directory,
		Title: "Scheduled: " + title, Version: s.version, Agent: spec.Agent,
		Time: core.SessionTime{Created: now.UnixMilli(), Updated: now.UnixMilli()},
	}
	err := s.st.Tx(ctx, func(tx store.Tx) error {
		if _, err := tx.Session(ctx, sess.ID); err == nil {
			return nil
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err := tx.InsertSession(ctx, sess); err != nil {
			return err
		}
		return tx.AppendEvent(ctx, core.MustEvent(sess.ID, core.EventSessionCreated, core.SessionProps{SessionID: sess.ID, Info: sess}))
	})
	if errors.Is(err, store.ErrConflict) {
		return nil // made at this moment by a node that took the tick over
	}
	if err != nil {
		return fmt.Errorf("new session: %w", err)
	}
	return nil
}
