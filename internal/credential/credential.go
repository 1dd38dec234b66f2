// Package credential keeps the providers' API keys and logins that clients
// give the server: opencode's PUT /auth/{id} (the TUI's /connect, plugins'
// OAuth callbacks) and opencode 2's integrations. A single node keeps them
// in a file of the server's own (JSON, mode 0600, written atomically: a
// temporary file in the same folder, synced, renamed over the old one, the
// folder synced), which the tools' sandbox hides. The nodes of a cluster
// keep them in their shared database (Share): every node reads and writes
// the same entries and hears of the others' changes. Either way no answer,
// log line or tool environment ever shows a key: a key leaves the store
// only toward its provider (config.BuildWith).
package credential

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"
)

// Entry is one stored credential: opencode's auth.json entry for an API
// key, with the label opencode 2 gives a connection, or an OAuth login a
// plugin made (its auth hook: the tokens, which the plugin refreshes
// itself through PUT /auth/{id}).
type Entry struct {
	Type  string `json:"type"`
	Key   string `json:"key,omitempty"`
	Label string `json:"label,omitempty"`
	// Time is when it was stored, in epoch ms.
	Time int64 `json:"time,omitempty"`
	// Refresh, Access and Expires (epoch ms) are an OAuth login's, with
	// AccountID and EnterpriseURL when its plugin gave them.
	Refresh       string `json:"refresh,omitempty"`
	Access        string `json:"access,omitempty"`
	Expires       int64  `json:"expires,omitempty"`
	AccountID     string `json:"accountId,omitempty"`
	EnterpriseURL string `json:"enterpriseUrl,omitempty"`
	// Metadata is what a plugin keeps beside an API key.
	Metadata map[string]string `json:"metadata,omitempty"`
}

// String names the entry without its key, so that a key printed by
// mistake (a log line, an error) shows nothing of itself.
func (e Entry) String() string { return "credential(" + e.Type + ", " + e.Label + ")" }

// GoString is String for %#v.
func (e Entry) GoString() string { return e.String() }

// Limits of what a client may store.
const (
	maxKey = 16 << 10
	maxID  = 128
)

// ErrInvalid is a provider id or key the store refuses.
var ErrInvalid = errors.New("invalid credential")

// Store is the credentials: a file, or a shared database once Share has
// moved them there; it holds what they hold in memory, which every read
// answers from.
type Store struct {
	path string
	// wmu orders the changes and the reloads, and is held through their
	// writes and reads of the file or database; mu guards m only, so that
	// a read (a model call asking for its key) never waits on them. m is
	// replaced, never changed in place, and only under both.
	wmu sync.Mutex
	mu  sync.Mutex
	m   map[string]Entry
	// shared is the database once Share has run; unwatch stops hearing
	// of its changes.
	shared  Shared
	unwatch func()

	watchMu  sync.Mutex
	watchers map[int]func(Change)
	watchSeq int
}

// Change is a provider's credential changing kind: Was and Now are the
// entry's type before and after ("" for none). A refreshed token or a
// renamed key is not a change.
type Change struct {
	ID, Was, Now string
}

// Watch calls fn after each change of a provider's kind of credential
// (a login, a key stored or forgotten), once the store holds it: in the
// goroutine that made it, or, for another node's change on a shared
// database, in the goroutine that heard of it (Share). Another node's
// changes are what differs between two reads of the database, so changes
// it made in quick succession may be heard as one (a key stored and then
// forgotten: nothing). A server that lists providers follows the store
// with it, reading the store anew at each call. The returned func stops
// the calls.
func (s *Store) Watch(fn func(Change)) (stop func()) {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	if s.watchers == nil {
		s.watchers = map[int]func(Change){}
	}
	s.watchSeq++
	n := s.watchSeq
	s.watchers[n] = fn
	return func() {
		s.watchMu.Lock()
		delete(s.watchers, n)
		s.watchMu.Unlock()
	}
}

// notify tells the watchers of the kinds that changed between was and now.
func (s *Store) notify(was, now map[string]Entry) {
	var changes []Change
	for id, e := range now {
		if was[id].Type != e.Type {
			changes = append(changes, Change{ID: id, Was: was[id].Type, Now: e.Type})
		}
	}
	for id, e := range was {
		if _, ok := now[id]; !ok {
			changes = append(changes, Change{ID: id, Was: e.Type})
		}
	}
	if len(changes) == 0 {
		return
	}
	s.watchMu.Lock()
	fns := make([]func(Change), 0, len(s.watchers))
	for _, fn := range s.watchers {
		fns = append(fns, fn)
	}
	s.watchMu.Unlock()
	for _, c := range changes {
		for _, fn := range fns {
			fn(c)
		}
	}
}

// Open reads the credential file at path (none yet is an empty store) and
// makes it readable by its owner only.
func Open(path string) (*Store, error) {
	m, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return &Store{path: path, m: m}, nil
}

// Path is the credential file (once Share has run, the one it imported).
func (s *Store) Path() string { return s.path }

// Key returns a provider's stored key and its label ("" when none).
func (s *Store) Key(id string) (key, label string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.m[id]
	return e.Key, e.Label
}

// Get returns a provider's stored credential; false when none.
func (s *Store) Get(id string) (Entry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[id]
	return e, ok
}

// Put stores a whole credential (an OAuth login, an API key with a
// plugin's metadata), checked as Set checks a key.
func (s *Store) Put(id string, e Entry) error {
	if !validID(id) {
		return fmt.Errorf("%w: provider id %q (letters, digits, - _ . only)", ErrInvalid, id)
	}
	switch e.Type {
	case "oauth":
		if e.Access == "" || len(e.Access)+len(e.Refresh) > maxKey {
			return fmt.Errorf("%w: an OAuth login needs its access token (at most %d bytes with the refresh token)", ErrInvalid, maxKey)
		}
	case "api", "wellknown":
		if e.Key == "" || len(e.Key) > maxKey || strings.ContainsAny(e.Key, "\r\n\x00") {
			return fmt.Errorf("%w: the key must be one line of at most %d bytes", ErrInvalid, maxKey)
		}
	default:
		return fmt.Errorf("%w: type %q: want api, wellknown or oauth", ErrInvalid, e.Type)
	}
	e.Time = time.Now().UnixMilli()
	return s.change(id, func(cur Entry, _ bool) (Entry, bool, bool) {
		if e.Label == "" {
			e.Label = cur.Label
		}
		return e, true, true
	})
}

// IDs lists the providers that have a stored key.
func (s *Store) IDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.m))
	for id := range s.m {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

func validID(id string) bool {
	if id == "" || len(id) > maxID {
		return false
	}
	for _, r := range id {
		if !(unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("-_.", r)) {
			return false
		}
	}
	return true
}

// Set stores (or replaces) a provider's API key.
func (s *Store) Set(id, key, label string) error {
	if !validID(id) {
		return fmt.Errorf("%w: provider id %q (letters, digits, - _ . only)", ErrInvalid, id)
	}
	if key == "" || len(key) > maxKey || strings.ContainsAny(key, "\r\n\x00") {
		return fmt.Errorf("%w: the key must be one line of at most %d bytes", ErrInvalid, maxKey)
	}
	e := Entry{Type: "api", Key: key, Label: label, Time: time.Now().UnixMilli()}
	return s.change(id, func(Entry, bool) (Entry, bool, bool) { return e, true, true })
}

// Label renames a provider's stored key; false when it has none.
func (s *Store) Label(id, label string) (bool, error) {
	found := false
	err := s.change(id, func(e Entry, ok bool) (Entry, bool, bool) {
		e.Label, found = label, ok
		return e, true, ok
	})
	return found, err
}

// Remove forgets a provider's stored key; false when it had none.
func (s *Store) Remove(id string) (bool, error) {
	found := false
	err := s.change(id, func(e Entry, ok bool) (Entry, bool, bool) {
		found = ok
		return e, false, ok
	})
	return found, err
}

// edit is one change of one provider's entry: given the entry as the
// store holds it (ok false when none), it returns the next one, keep
// false to forget it, and write false when nothing changes.
type edit func(cur Entry, ok bool) (next Entry, keep, write bool)

// change applies fn to provider id's entry where the entries live (the
// file, or the shared database, where fn sees the entry as the database
// holds it), then keeps the result in memory and tells the watchers: the
// store and what it reads from never disagree.
func (s *Store) change(id string, fn edit) error {
	s.wmu.Lock()
	var next Entry
	var keep, wrote bool
	var err error
	if s.shared != nil {
		next, keep, wrote, err = s.changeShared(id, fn)
	} else {
		next, keep, wrote, err = s.changeFile(id, fn)
	}
	if err != nil || !wrote {
		s.wmu.Unlock()
		return err
	}
	was := s.m
	now := make(map[string]Entry, len(was)+1)
	for k, v := range was {
		now[k] = v
	}
	if keep {
		now[id] = next
	} else {
		delete(now, id)
	}
	s.setM(now)
	s.wmu.Unlock()
	s.notify(was, now)
	return nil
}

// setM replaces the entries in memory, under s.wmu.
func (s *Store) setM(m map[string]Entry) {
	s.mu.Lock()
	s.m = m
	s.mu.Unlock()
}
