// Package credential keeps the providers' API keys that clients give the
// server: opencode's PUT /auth/{id} (the TUI's /connect) and opencode 2's
// integrations. They live in a file of the server's own (JSON, mode 0600,
// written atomically: a temporary file in the same folder, synced, renamed
// over the old one, the folder synced), which the tools' sandbox hides and
// which no answer, log line or tool environment ever shows: a key leaves
// the store only toward its provider (config.BuildWith).
package credential

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// Store is the credential file and what it holds.
type Store struct {
	path string
	mu   sync.Mutex
	m    map[string]Entry

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
// (a login, a key stored or forgotten), in the goroutine that made it,
// once the file holds it: a server that lists providers follows the
// store with it. The returned func stops the calls.
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
	s := &Store{path: path, m: map[string]Entry{}}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("read credentials %s: %w", path, err)
	}
	if json.Unmarshal(b, &s.m) != nil {
		// The decoder's error may quote the file: it is not repeated.
		return nil, fmt.Errorf("read credentials %s: not a credential file (malformed JSON)", path)
	}
	if s.m == nil {
		s.m = map[string]Entry{}
	}
	if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(path, 0o600); err != nil {
			return nil, fmt.Errorf("credentials %s are readable by others and cannot be made private: %w", path, err)
		}
	}
	return s, nil
}

// Path is the credential file.
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
	return s.change(func(m map[string]Entry) bool {
		if e.Label == "" {
			e.Label = m[id].Label
		}
		m[id] = e
		return true
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
	return s.change(func(m map[string]Entry) bool {
		m[id] = Entry{Type: "api", Key: key, Label: label, Time: time.Now().UnixMilli()}
		return true
	})
}

// Label renames a provider's stored key; false when it has none.
func (s *Store) Label(id, label string) (bool, error) {
	found := false
	err := s.change(func(m map[string]Entry) bool {
		e, ok := m[id]
		if ok {
			e.Label, found = label, true
			m[id] = e
		}
		return ok
	})
	return found, err
}

// Remove forgets a provider's stored key; false when it had none.
func (s *Store) Remove(id string) (bool, error) {
	found := false
	err := s.change(func(m map[string]Entry) bool {
		_, found = m[id]
		delete(m, id)
		return found
	})
	return found, err
}

// change applies fn to a copy of the entries and, when fn changed them,
// writes the file and then keeps the copy: the file and the store never
// disagree.
func (s *Store) change(fn func(map[string]Entry) bool) error {
	s.mu.Lock()
	was, err := s.changeLocked(fn)
	now := s.m
	s.mu.Unlock()
	if err == nil && was != nil {
		s.notify(was, now)
	}
	return err
}

// changeLocked is change under the lock: it returns the entries before
// the change (nil when nothing changed).
func (s *Store) changeLocked(fn func(map[string]Entry) bool) (map[string]Entry, error) {
	next := make(map[string]Entry, len(s.m)+1)
	for k, v := range s.m {
		next[k] = v
	}
	if !fn(next) {
		return nil, nil
	}
	b, err := json.MarshalIndent(next, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := writeAtomic(s.path, b); err != nil {
		return nil, fmt.Errorf("write credentials %s: %w", s.path, err)
	}
	was := s.m
	s.m = next
	return was, nil
}

// writeAtomic replaces path with data, mode 0600, all or nothing.
func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op once renamed
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
