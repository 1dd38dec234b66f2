// Package core holds agentd's domain types — sessions, messages, parts, runs,
// status and events — in the JSON shapes opencode clients expect, and the
// identifiers that order them.
package core

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"sync"
	"time"
)

// ID prefixes used by agentd. They match opencode's so that clients which
// inspect prefixes keep working.
const (
	PrefixSession    = "ses"
	PrefixMessage    = "msg"
	PrefixPart       = "prt"
	PrefixRun        = "run"
	PrefixPermission = "per"
	PrefixEvent      = "evt"
)

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// idGenerator remembers the last timestamp and a counter so that ids made
// in the same millisecond still sort in creation order within one process.
type idGenerator struct {
	mu      sync.Mutex
	lastMS  int64
	counter int64
}

var defaultIDs idGenerator

// NewID returns a new identifier in opencode's format: the prefix, an
// underscore, 12 hex digits holding the low 48 bits of ms*4096+counter, and
// 14 random base62 characters. Ascending ids sort oldest first; descending
// ids (used for sessions) have the time bits inverted and sort newest first.
func NewID(prefix string, descending bool) string {
	return defaultIDs.newAt(prefix, descending, time.Now())
}

// newAt makes an id at the given time. The 48 time bits wrap every 795 days,
// as opencode's do; ids that straddle a wrap compare out of order.
func (idGen *idGenerator) newAt(prefix string, descending bool, now time.Time) string {
	ms := now.UnixMilli()
	idGen.mu.Lock()
	// A clock that steps backwards must not make new ids sort before old
	// ones; keep using the last timestamp until the clock catches up.
	if ms < idGen.lastMS {
		ms = idGen.lastMS
	}
	if ms == idGen.lastMS {
		idGen.counter++
		if idGen.counter >= 4096 {
			// The counter would spill into the millisecond bits; borrow
			// the next millisecond instead so ordering stays strict.
			ms++
			idGen.counter = 0
		}
	} else {
		idGen.counter = 0
	}
	idGen.lastMS = ms
	v := uint64(ms)*4096 + uint64(idGen.counter)
	idGen.mu.Unlock()

	if descending {
		v = ^v
	}
	var b [6]byte
	for i := range 6 {
		b[i] = byte(v >> (40 - 8*i))
	}
	var sb strings.Builder
	sb.Grow(len(prefix) + 1 + 12 + 14)
	sb.WriteString(prefix)
	sb.WriteByte('_')
	sb.WriteString(hex.EncodeToString(b[:]))
	sb.WriteString(randomBase62(14))
	return sb.String()
}

func randomBase62(n int) string {
	buf := make([]byte, n)
	_, _ = rand.Read(buf) // crypto/rand.Read never fails on supported platforms.
	for i := range buf {
		buf[i] = base62[int(buf[i])%62]
	}
	return string(buf)
}

// MaxIDLen bounds a client's id.
const MaxIDLen = 128

// ValidID reports whether s can be an id with the given prefix: it starts
// with the prefix, as opencode's patterns (^msg, ^prt …) ask, and holds
// only letters, digits, '_', '-' and '.', at most MaxIDLen of them.
// Clients make ids of other layouts than agentd's; nothing is ordered by
// an id, so any such id will do. It is a cheap check that keeps garbage
// away from the store.
func ValidID(prefix, s string) bool {
	if len(s) <= len(prefix) || len(s) > MaxIDLen || !strings.HasPrefix(s, prefix) {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// Slug derives a session's short readable handle from its id's random
// tail.
func Slug(id string) string {
	if len(id) < 8 {
		return strings.ToLower(id)
	}
	return strings.ToLower(id[len(id)-8:])
}
