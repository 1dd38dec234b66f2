package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// The credentials clients store (package credential's Shared, migration
// 0014). A change is told to the other nodes on the store's LISTEN/NOTIFY
// channel (a "creds <node>" notice sent by its transaction, so only once
// it commits); a node hearing one, or reconnecting its listener, or at
// every poll interval in case a notice was lost, calls the watchers, which
// read the table again. Another node's change thus reaches a node within
// a notice's delivery, and at worst one poll interval (Options.Poll).

// credsPayload is the notice of a credential change by node.
func credsPayload(node string) string { return "creds " + node }

// credsWatch is the store's credential watchers.
type credsWatch struct {
	fns  map[int]func(context.Context) error
	seq  int
	kick chan struct{}
	// failing is set while the watchers' reads fail, so that an outage
	// is logged once.
	failing bool
}

// Credentials implements credential.Shared.
func (s *Store) Credentials(ctx context.Context) (map[string][]byte, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, data FROM credentials`)
	if err != nil {
		return nil, storageError(err)
	}
	defer rows.Close()
	out := map[string][]byte{}
	for rows.Next() {
		var id, data string
		if err := rows.Scan(&id, &data); err != nil {
			return nil, err
		}
		out[id] = []byte(data)
	}
	return out, storageError(rows.Err())
}

// ChangeCredential implements credential.Shared: the table is locked
// against the other writers for the transaction, so that fn's decision
// holds when it commits.
func (s *Store) ChangeCredential(ctx context.Context, id string, fn func(cur []byte) ([]byte, bool, error)) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return storageError(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `LOCK TABLE credentials IN SHARE ROW EXCLUSIVE MODE`); err != nil {
		return storageError(err)
	}
	var cur []byte
	var data string
	switch err := tx.QueryRowContext(ctx, `SELECT data FROM credentials WHERE id = $1`, id).Scan(&data); {
	case err == nil:
		cur = []byte(data)
	case !errors.Is(err, sql.ErrNoRows):
		return storageError(err)
	}
	next, write, err := fn(cur)
	if err != nil || !write {
		return err
	}
	if next == nil {
		_, err = tx.ExecContext(ctx, `DELETE FROM credentials WHERE id = $1`, id)
	} else {
		_, err = tx.ExecContext(ctx, `INSERT INTO credentials (id, data, updated_ms) VALUES ($1, $2, `+nowMS+`)
			ON CONFLICT (id) DO UPDATE SET data = excluded.data, updated_ms = excluded.updated_ms`, id, string(next))
	}
	if err != nil {
		return storageError(err)
	}
	// Delivered at commit, and only then.
	if _, err := tx.ExecContext(ctx, `SELECT pg_notify($1, $2)`, s.channel, credsPayload(s.node)); err != nil {
		return storageError(err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", storageError(err))
	}
	return nil
}

// WatchCredentials implements credential.Shared: fn is called in the
// store's credential goroutine, never two calls at once.
func (s *Store) WatchCredentials(fn func(context.Context) error) (stop func()) {
	s.hookMu.Lock()
	defer s.hookMu.Unlock()
	if s.creds.fns == nil {
		s.creds.fns = map[int]func(context.Context) error{}
	}
	s.creds.seq++
	n := s.creds.seq
	s.creds.fns[n] = fn
	return func() {
		s.hookMu.Lock()
		delete(s.creds.fns, n)
		s.hookMu.Unlock()
	}
}

// kickCreds has the credential watchers called (coalesced).
func (s *Store) kickCreds() {
	select {
	case s.creds.kick <- struct{}{}:
	default:
	}
}

// credsLoop calls the credential watchers at each notice and poll.
func (s *Store) credsLoop(ctx context.Context) {
	defer s.wg.Done()
	tick := time.NewTicker(s.poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.creds.kick:
		case <-tick.C:
		}
		s.hookMu.Lock()
		fns := make([]func(context.Context) error, 0, len(s.creds.fns))
		for _, fn := range s.creds.fns {
			fns = append(fns, fn)
		}
		s.hookMu.Unlock()
		var err error
		for _, fn := range fns {
			err = errors.Join(err, fn(ctx))
		}
		switch {
		case err != nil && ctx.Err() == nil && !s.creds.failing:
			s.creds.failing = true
			s.log.Warn("read the cluster's credentials", "err", err)
		case err == nil && s.creds.failing:
			s.creds.failing = false
			s.log.Info("the cluster's credentials are readable again")
		}
	}
}
