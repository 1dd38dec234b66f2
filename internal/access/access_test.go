package access

import (
	"crypto/sha256"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/sqlite"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func openStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "a.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestRevokedElsewhereRefusedWithinStaleness: a key revoked in the store by
// another node (not through these Keys) is refused here once what was
// read of it is Staleness old, and not trusted a moment longer; the clock
// is this node's, injected.
func TestRevokedElsewhereRefusedWithinStaleness(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := openStore(t)
	k := New(st)
	now := time.Unix(1_000_000, 0)
	k.now = func() time.Time { return now }
	key, token, err := k.Create(ctx, Spec{Name: "bot"})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := k.Authenticate(ctx, token); err != nil || c.KeyID != key.ID || c.Name != "bot" || c.All {
		t.Fatalf("a fresh key: %+v, %v", c, err)
	}
	if err := st.Tx(ctx, func(tx store.Tx) error { return tx.RevokeAPIKey(ctx, key.ID, now.UnixMilli()) }); err != nil {
		t.Fatal(err)
	}
	now = now.Add(Staleness - time.Millisecond)
	if _, err := k.Authenticate(ctx, token); err != nil {
		t.Fatalf("within Staleness the key read before holds: %v", err)
	}
	now = now.Add(time.Millisecond)
	if _, err := k.Authenticate(ctx, token); !errors.Is(err, ErrBadToken) {
		t.Fatalf("a key revoked elsewhere, Staleness later: %v, want ErrBadToken", err)
	}
}

// TestTokenStoredHashed: the store keeps the SHA-256 of the token's
// secret, never the token; a token with another secret, or naming no key,
// is refused.
func TestTokenStoredHashed(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := openStore(t)
	k := New(st)
	key, token, err := k.Create(ctx, Spec{Name: "ci", All: true})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := st.APIKey(ctx, key.ID)
	if err != nil {
		t.Fatal(err)
	}
	// agd_<16 hex>_<secret>: the secret's alphabet holds '_' too.
	secret := token[len("agd_")+idHexLen+1:]
	if sum := sha256.Sum256([]byte(secret)); string(stored.Hash) != string(sum[:]) || strings.Contains(string(stored.Hash), secret) {
		t.Fatalf("stored hash %x is not the secret's SHA-256", stored.Hash)
	}
	if !strings.HasPrefix(token, "agd_"+strings.TrimPrefix(key.ID, "key_")+"_") {
		t.Fatalf("token %q does not name key %s", token, key.ID)
	}
	last := "A"
	if strings.HasSuffix(token, "A") {
		last = "B"
	}
	other := token[:len(token)-1] + last
	for _, bad := range []string{other, "agd_0123456789abcdef_" + secret, "agd_" + secret, ""} {
		if _, err := k.Authenticate(ctx, bad); !errors.Is(err, ErrBadToken) {
			t.Errorf("token %q: %v, want ErrBadToken", bad, err)
		}
	}
	if c, err := k.Authenticate(ctx, token); err != nil || !c.All {
		t.Fatalf("the token: %+v, %v", c, err)
	}
}

func TestOperatorOnly(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		method, pattern string
		want            bool
	}{
		{"GET", "/key", true}, {"DELETE", "/key/{id}", true}, {"PUT", "/auth/{id}", true}, {"GET", "/pty/{ptyID}", true},
		{"POST", "/tui/publish", true}, {"POST", "/mcp", true}, {"POST", "/mcp/{name}/connect", true},
		{"GET", "/mcp", false}, {"GET", "/keys", false}, {"GET", "/session", false}, {"GET", "/ptyx", false},
		{"GET", "/global/config", false}, {"POST", "/global/dispose", true},
	} {
		if got := OperatorOnly(c.method, c.pattern); got != c.want {
			t.Errorf("OperatorOnly(%s %s) = %t, want %t", c.method, c.pattern, got, c.want)
		}
	}
}
