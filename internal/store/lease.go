package store

import (
	"context"
	"errors"
	"time"

	"github.com/agentd/agentd/internal/core"
)

// ErrFenced is returned by a transaction made under a lease that its node
// no longer holds (it expired, or another node claimed the run): nothing of
// the transaction was written, and the run must stop at once.
var ErrFenced = errors.New("lease lost: the run belongs to another node now")

// Lease is one node's ownership of one executing run. Epoch is the fencing
// token: every claim increments it, so a write made under an older epoch is
// refused.
type Lease struct {
	RunID string
	Owner string
	Epoch int64
	// Lost, when set, is called (once per refused transaction) when a
	// write finds the lease gone, so that the run stops before it tries
	// another.
	Lost func()
}

type leaseKey struct{}

// WithLease returns a context whose transactions are fenced by the lease:
// a store shared by several nodes checks, inside each transaction, that
// the lease is still held and unexpired, and refuses it with ErrFenced
// otherwise. Stores of one node ignore it.
func WithLease(ctx context.Context, l *Lease) context.Context {
	return context.WithValue(ctx, leaseKey{}, l)
}

// LeaseFrom returns the lease that fences ctx's transactions, or nil.
func LeaseFrom(ctx context.Context) *Lease {
	l, _ := ctx.Value(leaseKey{}).(*Lease)
	return l
}

// Prior tells what a claim found of the run's previous owner.
type Prior int

// What a claimed run's previous owner left.
const (
	// PriorNone: the run was never claimed (it was just admitted).
	PriorNone Prior = iota
	// PriorReleased: its owner let it go in a clean shutdown.
	PriorReleased
	// PriorExpired: its owner stopped renewing (it died, hung or lost the
	// database); its run was cut off.
	PriorExpired
)

// Claim is a run a node has just taken.
type Claim struct {
	Run   core.Run
	Lease Lease
	Prior Prior
	// AbortReason is set when a client asked for the run to end before
	// this node claimed it.
	AbortReason core.EndReason
	// Stopped says that the previous owner stopped: it shut down, is no
	// longer connected, or was an earlier process of this node. It is
	// false for a lease that merely lapsed while its node lives on, and
	// for a run parked paused (Park): the run was not cut off by a restart.
	Stopped bool
}

// Renewal is the answer to a renewal of a node's leases.
type Renewal struct {
	// Lost lists the runs whose lease the node no longer holds.
	Lost []string
	// Ended lists the runs that have ended while the node held their
	// lease: nothing is lost, the lease is merely of no more use.
	Ended []string
	// Aborts maps runs a client asked to end to the reason.
	Aborts map[string]core.EndReason
}

// Leaser is implemented by stores that several nodes share. A node claims
// a run before it executes it, renews its leases while it runs them and
// releases them when it stops cleanly; every write of the run is fenced by
// the lease (WithLease). Times are on the database's clock.
type Leaser interface {
	// Node is this node's id, the owner named in its leases.
	Node() string
	// Claim takes the run for this node for ttl when it is not ended and
	// nobody holds an unexpired lease on it. ok is false when it is not
	// claimable (ended, or held by a live node).
	Claim(ctx context.Context, runID string, ttl time.Duration) (c Claim, ok bool, err error)
	// Claimable lists up to limit sessions whose oldest non-terminal run
	// nobody holds: admitted runs no node has started and runs whose
	// owner's lease expired or was released.
	Claimable(ctx context.Context, limit int) ([]string, error)
	// Renew extends this node's leases by ttl.
	Renew(ctx context.Context, leases []Lease, ttl time.Duration) (Renewal, error)
	// Release gives up this node's leases at once (a clean shutdown), so
	// that another node continues the runs without waiting for expiry.
	Release(ctx context.Context, leases []Lease) error
	// Park gives up this node's lease of a run it holds paused for an
	// explicit resume (package pause): nobody claims the run while it
	// stays paused, and the claim after the resume is not Stopped.
	Park(ctx context.Context, l Lease) error
	// RequestAbort records that the run must end interrupted with reason
	// and wakes its owner.
	RequestAbort(ctx context.Context, runID string, reason core.EndReason) error
	// OnAbort registers the function called when another node asks for a
	// run to end. Call it before the first claim.
	OnAbort(func(runID string, reason core.EndReason))
}
