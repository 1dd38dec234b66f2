package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// Claim implements store.Leaser. The run's row is locked with SKIP LOCKED:
// when another node is claiming it at this moment, this one moves on.
func (s *Store) Claim(ctx context.Context, runID string, ttl time.Duration) (store.Claim, bool, error) {
	var (
		c                store.Claim
		data             string
		oldEpoch, oldExp int64
	)
	err := s.db.QueryRowContext(ctx, `WITH c AS (
			SELECT id, lease_epoch AS old_epoch, lease_expires_ms AS old_exp, `+s.stopped+` AS stopped FROM runs
			WHERE id = $1 AND `+s.claimable+` FOR UPDATE SKIP LOCKED)
		UPDATE runs r SET lease_owner = $2, lease_epoch = r.lease_epoch + 1, lease_expires_ms = `+nowMS+` + $3
		FROM c WHERE r.id = c.id
		RETURNING r.data, r.lease_epoch, c.old_epoch, c.old_exp, c.stopped, r.abort_reason`,
		runID, s.node, ttl.Milliseconds()).Scan(&data, &c.Lease.Epoch, &oldEpoch, &oldExp, &c.Stopped, &c.AbortReason)
	if errors.Is(err, sql.ErrNoRows) {
		return c, false, nil
	}
	if err != nil {
		return c, false, fmt.Errorf("claim run %s: %w", runID, storageError(err))
	}
	if err := json.Unmarshal([]byte(data), &c.Run); err != nil {
		return c, false, fmt.Errorf("decode run %s: %w", runID, err)
	}
	c.Lease.RunID, c.Lease.Owner = runID, s.node
	switch {
	case oldEpoch == 0:
		c.Prior = store.PriorNone
	case oldExp == 0:
		c.Prior = store.PriorReleased
	default:
		c.Prior = store.PriorExpired
	}
	return c, true, nil
}

// Claimable implements store.Leaser.
func (s *Store) Claimable(ctx context.Context, limit int) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT session_id FROM (
			SELECT DISTINCT ON (session_id) id, session_id, created_ms, lease_epoch, lease_expires_ms, lease_owner, state FROM runs
			WHERE state IN ('queued', 'running', 'retrying') ORDER BY session_id, created_ms, id) oldest
		WHERE `+s.claimable+` AND `+parkedPaused+`
		ORDER BY created_ms LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("list claimable runs: %w", storageError(err))
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("list claimable runs: %w", err)
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// Renew implements store.Leaser in one statement for all of the node's
// leases. A lease that has already expired is not renewed (another node
// may be claiming it): the node must stop that run. A run that ended since
// the node read its leases is renewed all the same and reported ended, so
// that the race of a renewal with a run's last write is not taken for a
// lost lease.
func (s *Store) Renew(ctx context.Context, leases []store.Lease, ttl time.Duration) (store.Renewal, error) {
	var r store.Renewal
	if len(leases) == 0 {
		return r, nil
	}
	ids := make([]string, len(leases))
	epochs := make([]int64, len(leases))
	for i, l := range leases {
		ids[i], epochs[i] = l.RunID, l.Epoch
	}
	rows, err := s.db.QueryContext(ctx, `UPDATE runs r SET lease_expires_ms = `+nowMS+` + $1
		FROM unnest($2::text[], $3::bigint[]) AS l(id, epoch)
		WHERE r.id = l.id AND r.lease_epoch = l.epoch AND r.lease_owner = $4
			AND r.lease_expires_ms > `+nowMS+`
		RETURNING r.id, r.abort_reason, r.state IN ('queued', 'running', 'retrying')`, ttl.Milliseconds(), ids, epochs, s.node)
	if err != nil {
		return r, fmt.Errorf("renew %d leases: %w", len(leases), storageError(err))
	}
	defer rows.Close()
	held := make(map[string]bool, len(leases))
	for rows.Next() {
		var id, reason string
		var active bool
		if err := rows.Scan(&id, &reason, &active); err != nil {
			return r, fmt.Errorf("renew leases: %w", err)
		}
		held[id] = true
		if !active {
			r.Ended = append(r.Ended, id)
			continue
		}
		if reason != "" {
			if r.Aborts == nil {
				r.Aborts = map[string]core.EndReason{}
			}
			r.Aborts[id] = core.EndReason(reason)
		}
	}
	if err := rows.Err(); err != nil {
		return r, fmt.Errorf("renew leases: %w", storageError(err))
	}
	for _, l := range leases {
		if !held[l.RunID] {
			r.Lost = append(r.Lost, l.RunID)
		}
	}
	return r, nil
}

// Release implements store.Leaser: an expiry of 0 marks the lease released,
// so that the next claim knows the run was stopped cleanly.
func (s *Store) Release(ctx context.Context, leases []store.Lease) error {
	if len(leases) == 0 {
		return nil
	}
	ids := make([]string, len(leases))
	epochs := make([]int64, len(leases))
	for i, l := range leases {
		ids[i], epochs[i] = l.RunID, l.Epoch
	}
	_, err := s.db.ExecContext(ctx, `UPDATE runs r SET lease_expires_ms = 0
		FROM unnest($1::text[], $2::bigint[]) AS l(id, epoch)
		WHERE r.id = l.id AND r.lease_epoch = l.epoch AND r.lease_owner = $3`, ids, epochs, s.node)
	if err != nil {
		return fmt.Errorf("release %d leases: %w", len(leases), storageError(err))
	}
	s.wake()
	return nil
}

// Park implements store.Leaser: the lease is released with no owner, so
// that the claim after a resume is not taken for a stopped node's, and
// Claimable leaves the run out while it stays paused.
func (s *Store) Park(ctx context.Context, l store.Lease) error {
	_, err := s.db.ExecContext(ctx, `UPDATE runs SET lease_owner = '', lease_expires_ms = 0
		WHERE id = $1 AND lease_epoch = $2 AND lease_owner = $3`, l.RunID, l.Epoch, s.node)
	if err != nil {
		return fmt.Errorf("park run %s: %w", l.RunID, storageError(err))
	}
	return nil
}

// parkedPaused is Claimable's condition that leaves out a parked run (no
// owner, once claimed) still paused; a parked run that a resume took out
// of its pause is listed again, in case the node that resumed it stopped
// before claiming it. Only a parked run's data is decoded.
const parkedPaused = `CASE WHEN oldest.lease_owner = '' AND oldest.lease_epoch > 0
	THEN (SELECT p.data::jsonb ->> 'phase' FROM runs p WHERE p.id = oldest.id) IS DISTINCT FROM 'paused'
	ELSE true END`

// RequestAbort implements store.Leaser. The request is durable (the owner
// also finds it when it renews, and a node that claims the run later ends
// it), and the notification only makes it fast.
func (s *Store) RequestAbort(ctx context.Context, runID string, reason core.EndReason) error {
	_, err := s.db.ExecContext(ctx, `UPDATE runs SET abort_reason = $2 WHERE id = $1 AND abort_reason = ''`, runID, reason)
	if err != nil {
		return fmt.Errorf("request abort of run %s: %w", runID, storageError(err))
	}
	_, err = s.db.ExecContext(ctx, `SELECT pg_notify($1, $2)`, s.channel, "abort "+runID+" "+string(reason))
	if err != nil {
		return fmt.Errorf("notify abort of run %s: %w", runID, storageError(err))
	}
	return nil
}

// OnAbort implements store.Leaser.
func (s *Store) OnAbort(fn func(runID string, reason core.EndReason)) {
	s.hookMu.Lock()
	s.abortFn = fn
	s.hookMu.Unlock()
}
