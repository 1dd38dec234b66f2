package access

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/agentd/agentd/internal/budget"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// Staleness bounds how long a node trusts what it read of a key: a key
// revoked on any node is refused everywhere within it.
const Staleness = 500 * time.Millisecond

// cacheSize bounds the keys remembered; past it the memory is dropped.
const cacheSize = 4096

// Token format: "agd_" + the key id's 16 hex digits + "_" + the secret
// (32 random bytes, base64url). The prefix lets secret scanners find
// leaked tokens; the id lets the server read the key without looking up
// the secret.
const (
	tokenPrefix = "agd_"
	idPrefix    = "key_"
	idHexLen    = 16
)

// ErrBadToken is a bearer token that names no valid key: malformed,
// unknown, wrong or revoked (the answer does not say which).
var ErrBadToken = errors.New("the API key is not valid (unknown, wrong or revoked)")

// InputError is a request to make or change a key that cannot be served
// as given.
type InputError struct{ Msg string }

func (e *InputError) Error() string { return e.Msg }

// Keys is the API keys of one node: made, listed and revoked in the
// store, and checked on each request with what was read of them at most
// Staleness ago. The nil *Keys has no keys: every request is the
// operator's and sees everything.
type Keys struct {
	st  store.Store
	now func() time.Time

	mu    sync.Mutex
	cache map[string]cachedKey
}

type cachedKey struct {
	key store.APIKey
	at  time.Time
}

// New returns the keys kept in st.
func New(st store.Store) *Keys {
	return &Keys{st: st, now: time.Now, cache: map[string]cachedKey{}}
}

// Authenticate returns the key a bearer token names, or ErrBadToken.
func (k *Keys) Authenticate(ctx context.Context, token string) (*Caller, error) {
	id, secret, ok := parseToken(token)
	if !ok || k == nil {
		return nil, ErrBadToken
	}
	key, err := k.read(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrBadToken
	}
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(secret))
	if subtle.ConstantTimeCompare(sum[:], key.Hash) != 1 || key.Revoked != 0 {
		return nil, ErrBadToken
	}
	return &Caller{KeyID: key.ID, Name: key.Name, All: key.AllSessions}, nil
}

// read returns a key as read at most Staleness ago.
func (k *Keys) read(ctx context.Context, id string) (store.APIKey, error) {
	now := k.now()
	k.mu.Lock()
	c, ok := k.cache[id]
	k.mu.Unlock()
	if ok && now.Sub(c.at) < Staleness {
		return c.key, nil
	}
	key, err := k.st.APIKey(ctx, id)
	if err != nil {
		return key, err
	}
	k.mu.Lock()
	if len(k.cache) >= cacheSize {
		clear(k.cache)
	}
	k.cache[id] = cachedKey{key: key, at: now}
	k.mu.Unlock()
	return key, nil
}

// forget drops what this node read of a key, so that its own change is
// seen at once.
func (k *Keys) forget(id string) {
	k.mu.Lock()
	delete(k.cache, id)
	k.mu.Unlock()
}

func parseToken(tok string) (id, secret string, ok bool) {
	rest, ok := strings.CutPrefix(tok, tokenPrefix)
	if !ok || len(rest) < idHexLen+2 || rest[idHexLen] != '_' {
		return "", "", false
	}
	if _, err := hex.DecodeString(rest[:idHexLen]); err != nil {
		return "", "", false
	}
	return idPrefix + rest[:idHexLen], rest[idHexLen+1:], true
}

// Spec is what a new key is made with.
type Spec struct {
	Name string
	// All lets the key see every session, not only its own.
	All    bool
	Budget core.Budget
}

// Create makes a key and returns it with its token, the only time the
// token exists outside the client that receives it.
func (k *Keys) Create(ctx context.Context, spec Spec) (store.APIKey, string, error) {
	if err := validName(spec.Name); err != nil {
		return store.APIKey{}, "", err
	}
	if err := budget.Valid(spec.Budget); err != nil {
		return store.APIKey{}, "", &InputError{err.Error()}
	}
	var raw [idHexLen/2 + 32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return store.APIKey{}, "", err
	}
	idHex := hex.EncodeToString(raw[:idHexLen/2])
	secret := base64.RawURLEncoding.EncodeToString(raw[idHexLen/2:])
	sum := sha256.Sum256([]byte(secret))
	key := store.APIKey{ID: idPrefix + idHex, Name: spec.Name, Hash: sum[:], AllSessions: spec.All,
		Budget: core.Budget{Tokens: spec.Budget.Tokens, Cost: spec.Budget.Cost}, Created: k.now().UnixMilli()}
	err := k.st.Tx(ctx, func(tx store.Tx) error { return tx.InsertAPIKey(ctx, key) })
	if errors.Is(err, store.ErrConflict) {
		return store.APIKey{}, "", &InputError{fmt.Sprintf("name: a key named %q exists (revoke it first, or choose another name)", spec.Name)}
	}
	if err != nil {
		return store.APIKey{}, "", fmt.Errorf("create key: %w", err)
	}
	return key, tokenPrefix + idHex + "_" + secret, nil
}

// validName accepts names an operator can type and a log can print: 1 to
// 64 letters, digits, '-', '_' and '.'.
func validName(name string) error {
	if name == "" || len(name) > 64 {
		return &InputError{"name: 1 to 64 characters are required"}
	}
	for _, r := range name {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune("-_.", r) {
			return &InputError{fmt.Sprintf("name: %q may hold only letters, digits, '-', '_' and '.'", name)}
		}
	}
	return nil
}

// List returns every key, revoked ones included, oldest first.
func (k *Keys) List(ctx context.Context) ([]store.APIKey, error) {
	return k.st.APIKeys(ctx)
}

// Find returns the key with this id, or the one key not revoked with this
// name; store.ErrNotFound when there is none.
func (k *Keys) Find(ctx context.Context, idOrName string) (store.APIKey, error) {
	if strings.HasPrefix(idOrName, idPrefix) {
		return k.st.APIKey(ctx, idOrName)
	}
	list, err := k.st.APIKeys(ctx)
	if err != nil {
		return store.APIKey{}, err
	}
	for _, key := range list {
		if key.Name == idOrName && key.Revoked == 0 {
			return key, nil
		}
	}
	return store.APIKey{}, store.ErrNotFound
}

// Revoke revokes a key (by id or name): from now on on this node, and
// within Staleness on every other.
func (k *Keys) Revoke(ctx context.Context, idOrName string) (store.APIKey, error) {
	key, err := k.Find(ctx, idOrName)
	if err != nil {
		return key, err
	}
	err = k.st.Tx(ctx, func(tx store.Tx) error { return tx.RevokeAPIKey(ctx, key.ID, k.now().UnixMilli()) })
	k.forget(key.ID)
	if err != nil {
		return key, fmt.Errorf("revoke key %s: %w", key.ID, err)
	}
	return k.st.APIKey(ctx, key.ID)
}

// SetBudget replaces a key's caps (by id or name).
func (k *Keys) SetBudget(ctx context.Context, idOrName string, b core.Budget) (store.APIKey, error) {
	if err := budget.Valid(b); err != nil {
		return store.APIKey{}, &InputError{err.Error()}
	}
	key, err := k.Find(ctx, idOrName)
	if err != nil {
		return key, err
	}
	if err := k.st.Tx(ctx, func(tx store.Tx) error { return tx.SetAPIKeyBudget(ctx, key.ID, b) }); err != nil {
		return key, fmt.Errorf("set budget of key %s: %w", key.ID, err)
	}
	return k.st.APIKey(ctx, key.ID)
}

// KeyInfo is a key as the API shows it: never its hash; its token only in
// the answer that made it.
type KeyInfo struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Sessions is "own" (the sessions made through the key) or "all".
	Sessions string `json:"sessions"`
	// Budget is the key's caps with what its sessions spent.
	Budget core.Budget `json:"budget"`
	Time   KeyTime     `json:"time"`
	// Token is the bearer token, shown once.
	Token string `json:"token,omitempty"`
}

// KeyTime holds a key's times in epoch milliseconds (Revoked absent while
// it is valid).
type KeyTime struct {
	Created int64 `json:"created"`
	Revoked int64 `json:"revoked,omitempty"`
}

// Info is k as the API shows it.
func Info(k store.APIKey) KeyInfo {
	in := KeyInfo{ID: k.ID, Name: k.Name, Sessions: "own", Time: KeyTime{Created: k.Created, Revoked: k.Revoked},
		Budget: core.Budget{Tokens: k.Budget.Tokens, Cost: k.Budget.Cost, Spent: &core.Spend{Tokens: k.Spent.Tokens, Cost: k.Spent.Cost}}}
	if k.AllSessions {
		in.Sessions = "all"
	}
	return in
}
