package credential

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"time"
)

// Shared is a database that keeps the credentials of every node of a
// cluster (package postgres's store, migration 0014): each entry as JSON
// (the file's shape), by provider id. It knows nothing of what an entry
// holds.
type Shared interface {
	// Credentials returns every stored entry.
	Credentials(ctx context.Context) (map[string][]byte, error)
	// ChangeCredential changes provider id's entry in one transaction
	// that no other change of the credentials interleaves with: fn gets
	// the entry as the database holds it (nil when none) and returns what
	// to store (nil to delete it), and false to leave it as it is. The
	// other nodes are told once it commits.
	ChangeCredential(ctx context.Context, id string, fn func(cur []byte) (next []byte, write bool, err error)) error
	// WatchCredentials calls fn after another node may have changed the
	// credentials: when its notice arrives, and at least once every poll
	// interval, since a notice can be lost. stop ends the calls.
	WatchCredentials(fn func(ctx context.Context) error) (stop func())
}

// ErrMalformed is a stored entry that is not a credential: Share and the
// reloads leave it out (and say so) and keep the others.
var ErrMalformed = errors.New("not a credential")

// sharedTimeout bounds one change in the shared database: the store's
// methods take no context (a request's end must not cut a change short).
const sharedTimeout = 30 * time.Second

// ImportedSuffix is added to a credential file's name once Share has
// imported it: the file no longer counts, and a key forgotten in the
// cluster is not brought back by the next start.
const ImportedSuffix = ".imported"

// Share moves the store into db, the cluster's shared database: the
// entries of the credential file, when there is one, are imported (an
// entry the database holds already wins unless the file's is newer), the
// file is renamed with ImportedSuffix, and from then on every read answers
// what the database holds and every change goes to the database. Another
// node's change reaches this store, and its watchers, when db says that
// the credentials may have changed (WatchCredentials). Calling Share again
// (a restarted node) moves the store to the new db. An error wrapping
// ErrMalformed says that the store moved without the entries it names.
func (s *Store) Share(ctx context.Context, db Shared) error {
	s.wmu.Lock()
	if err := s.importFile(ctx, db); err != nil {
		s.wmu.Unlock()
		return err
	}
	now, err := load(ctx, db)
	if err != nil && now == nil {
		s.wmu.Unlock()
		return err
	}
	if s.unwatch != nil {
		s.unwatch()
	}
	was := s.m
	s.shared = db
	s.setM(now)
	s.unwatch = db.WatchCredentials(func(ctx context.Context) error { return s.reload(ctx, db) })
	s.wmu.Unlock()
	s.notify(was, now)
	return err
}

// importFile copies the credential file's entries into db, under s.wmu,
// and renames the file.
func (s *Store) importFile(ctx context.Context, db Shared) error {
	if s.path == "" {
		return nil
	}
	if _, err := os.Stat(s.path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	file, err := readFile(s.path)
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(file))
	for id := range file {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		e := file[id]
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		err = db.ChangeCredential(ctx, id, func(cur []byte) ([]byte, bool, error) {
			var have Entry
			if cur != nil && json.Unmarshal(cur, &have) == nil && have.Time >= e.Time {
				return nil, false, nil
			}
			return b, true, nil
		})
		if err != nil {
			return fmt.Errorf("import credentials %s: %s: %w", s.path, id, err)
		}
	}
	if err := os.Rename(s.path, s.path+ImportedSuffix); err != nil {
		return fmt.Errorf("credentials %s were imported into the database but the file cannot be set aside: %w", s.path, err)
	}
	return nil
}

// load reads every entry db holds. An entry that does not decode is left
// out and reported (without its content); the others are still returned.
func load(ctx context.Context, db Shared) (map[string]Entry, error) {
	rows, err := db.Credentials(ctx)
	if err != nil {
		return nil, fmt.Errorf("read credentials: %w", err)
	}
	m := make(map[string]Entry, len(rows))
	var bad []string
	for id, b := range rows {
		var e Entry
		if json.Unmarshal(b, &e) != nil {
			bad = append(bad, id)
			continue
		}
		m[id] = e
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return m, fmt.Errorf("read credentials: %w: the entries of %v (malformed JSON)", ErrMalformed, bad)
	}
	return m, nil
}

// reload reads the entries db holds again and tells the watchers what
// changed: another node's change reaching this one.
func (s *Store) reload(ctx context.Context, db Shared) error {
	s.wmu.Lock()
	if s.shared != db {
		s.wmu.Unlock()
		return nil
	}
	now, err := load(ctx, db)
	if now == nil {
		s.wmu.Unlock()
		return err
	}
	was := s.m
	s.setM(now)
	s.wmu.Unlock()
	s.notify(was, now)
	return err
}

// changeShared is change for the shared database, under s.wmu: fn sees the
// entry as the database holds it, whatever this node last read.
func (s *Store) changeShared(id string, fn edit) (next Entry, keep, wrote bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	defer cancel()
	err = s.shared.ChangeCredential(ctx, id, func(cur []byte) ([]byte, bool, error) {
		var e Entry
		ok := cur != nil
		if ok && json.Unmarshal(cur, &e) != nil {
			return nil, false, fmt.Errorf("the stored entry of %s is not a credential (malformed JSON)", id)
		}
		var write bool
		if next, keep, write = fn(e, ok); !write {
			return nil, false, nil
		}
		wrote = true
		if !keep {
			return nil, true, nil
		}
		b, err := json.Marshal(next)
		return b, true, err
	})
	if err != nil {
		return next, keep, false, fmt.Errorf("write credentials: %w", err)
	}
	return next, keep, wrote, nil
}
