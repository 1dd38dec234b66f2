package store

import "context"

// Schedule is a schedule's durable row (package schedule): what it sends
// and when, opaque to the store, and the state of its ticks, which the
// store updates only conditionally so that nodes sharing the database
// fire each tick once.
type Schedule struct {
	ID      string
	Created int64
	// Spec is the schedule itself, opaque to the store.
	Spec []byte
	// Next is the next tick not yet claimed (epoch ms); 0: never again.
	Next int64
	// Pending is a claimed tick not yet fired (opaque), nil when none;
	// after PendingExpires (epoch ms, the claimer's clock) another node
	// may take it over.
	Pending        []byte
	PendingExpires int64
	// Last is the outcome of the last tick fired or skipped (opaque), nil
	// before the first.
	Last []byte
}

// ScheduleReader reads schedules.
type ScheduleReader interface {
	// Schedule returns one schedule or ErrNotFound.
	Schedule(ctx context.Context, id string) (Schedule, error)
	// Schedules lists every schedule, oldest first.
	Schedules(ctx context.Context) ([]Schedule, error)
	// DueSchedules lists, oldest tick first and at most limit, the
	// schedules with work at time now (epoch ms): a tick due (Next > 0 and
	// at most now, and no pending tick), or a pending tick whose claim
	// has expired.
	DueSchedules(ctx context.Context, now int64, limit int) ([]Schedule, error)
}

// ScheduleWriter changes schedules, inside a transaction.
type ScheduleWriter interface {
	// InsertSchedule adds a schedule; ErrConflict if the id exists.
	InsertSchedule(ctx context.Context, s Schedule) error
	// DeleteSchedule removes a schedule; ErrNotFound if there is none.
	DeleteSchedule(ctx context.Context, id string) error
	// ClaimTick moves a schedule's tick due to next and records pending
	// with its expiry, only if the stored Next is still due and no tick
	// is pending: of nodes that claim one tick at once, exactly one gets
	// nil, and the others ErrNotFound.
	ClaimTick(ctx context.Context, id string, due, next int64, pending []byte, expires int64) error
	// TakePending extends the claim on a pending tick to expires, only if
	// its expiry is still was (the claim a node found lapsed);
	// ErrNotFound otherwise.
	TakePending(ctx context.Context, id string, was, expires int64) error
	// FinishTick records last and clears the pending tick, only if the
	// claim is still the caller's (its expiry is still claim);
	// ErrNotFound otherwise.
	FinishTick(ctx context.Context, id string, claim int64, last []byte) error
}
