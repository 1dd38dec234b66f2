package credential

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStoreKeepsKeysPrivately(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "agentd.db.credentials.json")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if key, _ := s.Key("anthropic"); key != "" {
		t.Fatalf("empty store has key %q", key)
	}
	if err := s.Set("anthropic", "sk-ant-secret", "work"); err != nil {
		t.Fatal(err)
	}
	if err := s.Set("openai", "sk-oai-secret", ""); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("file mode %v (%v), want 0600", st.Mode().Perm(), err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("the folder holds %d files after two writes, want only the credential file", len(entries))
	}
	// Another process reading the file sees the same.
	s2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if key, label := s2.Key("anthropic"); key != "sk-ant-secret" || label != "work" {
		t.Errorf("reopened: %q %q", key, label)
	}
	if ok, err := s2.Label("anthropic", "home"); !ok || err != nil {
		t.Errorf("label: %v %v", ok, err)
	}
	if ok, _ := s2.Label("nobody", "x"); ok {
		t.Error("renamed a key that is not stored")
	}
	if ok, err := s2.Remove("openai"); !ok || err != nil {
		t.Errorf("remove: %v %v", ok, err)
	}
	if ok, _ := s2.Remove("openai"); ok {
		t.Error("removed a key twice")
	}
	s3, _ := Open(path)
	if ids := s3.IDs(); len(ids) != 1 || ids[0] != "anthropic" {
		t.Errorf("after remove: %v", ids)
	}
	if _, label := s3.Key("anthropic"); label != "home" {
		t.Errorf("label after reopen: %q", label)
	}
}

func TestStoreRefusesBadInput(t *testing.T) {
	t.Parallel()
	s, err := Open(filepath.Join(t.TempDir(), "c.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ id, key string }{
		{"", "k"}, {"../etc", "k"}, {"a/b", "k"}, {strings.Repeat("a", 200), "k"},
		{"ok", ""}, {"ok", "two\nlines"}, {"ok", strings.Repeat("k", maxKey+1)},
	} {
		if err := s.Set(tc.id, tc.key, ""); !errors.Is(err, ErrInvalid) {
			t.Errorf("Set(%.20q, %.20q) = %v, want ErrInvalid", tc.id, tc.key, err)
		}
	}
}

// TestKeysNeverPrinted: an entry printed by mistake, in any verb, shows
// nothing of its key; a malformed file's error quotes nothing of it.
func TestKeysNeverPrinted(t *testing.T) {
	t.Parallel()
	e := Entry{Type: "api", Key: "sk-very-secret", Label: "work"}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		if out := fmt.Sprintf(verb, e); strings.Contains(out, "secret") {
			t.Errorf("%s prints the key: %s", verb, out)
		}
		if out := fmt.Sprintf(verb, map[string]Entry{"x": e}); strings.Contains(out, "secret") {
			t.Errorf("%s of a map prints the key: %s", verb, out)
		}
	}
	path := filepath.Join(t.TempDir(), "c.json")
	if err := os.WriteFile(path, []byte(`{"x":{"type":"api","key":"sk-very-secret"`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path); err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("malformed file: %v", err)
	}
}

func TestOpenMakesFilePrivate(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "c.json")
	if err := os.WriteFile(path, []byte(`{"x":{"type":"api","key":"k"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v after open, want 0600", st.Mode().Perm())
	}
}

// TestStoreKeepsLogins: an OAuth login a plugin made is kept whole
// (tokens, expiry, account) across a reopen, is no API key for the
// providers built from keys, and is refused without its access token.
func TestStoreKeepsLogins(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "c.json")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	login := Entry{Type: "oauth", Refresh: "r-1", Access: "a-1", Expires: 1700000000000, AccountID: "acct"}
	if err := s.Put("anthropic", login); err != nil {
		t.Fatal(err)
	}
	if err := s.Put("anthropic", Entry{Type: "oauth", Refresh: "r"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("a login without its access token: %v", err)
	}
	s2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := s2.Get("anthropic")
	if !ok || got.Access != "a-1" || got.Refresh != "r-1" || got.Expires != 1700000000000 || got.AccountID != "acct" || got.Type != "oauth" {
		t.Errorf("reopened: %+v", got)
	}
	if key, _ := s2.Key("anthropic"); key != "" {
		t.Errorf("a login read as an API key: %q", key)
	}
	if s := fmt.Sprint(got); strings.Contains(s, "a-1") || strings.Contains(s, "r-1") {
		t.Errorf("a login printed its tokens: %s", s)
	}
}

// TestWatchSeesKinds: a watcher hears of a provider's credential changing
// kind (stored, replaced by another kind, forgotten) once the file holds
// it, and not of a refreshed token or a renamed key; stopped, it hears
// nothing more.
func TestWatchSeesKinds(t *testing.T) {
	t.Parallel()
	s, err := Open(filepath.Join(t.TempDir(), "c.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	stop := s.Watch(func(c Change) {
		if _, ok := s.Get(c.ID); ok != (c.Now != "") {
			t.Errorf("%v heard before the store holds it", c)
		}
		got = append(got, fmt.Sprintf("%s:%s>%s", c.ID, c.Was, c.Now))
	})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Set("openai", "sk-1", "a"))
	must(s.Set("openai", "sk-2", "a")) // the same kind
	_, err = s.Label("openai", "b")
	must(err)
	must(s.Put("openai", Entry{Type: "oauth", Access: "x", Refresh: "r"}))
	must(s.Put("openai", Entry{Type: "oauth", Access: "y", Refresh: "r"})) // a refresh
	_, err = s.Remove("openai")
	must(err)
	_, err = s.Remove("openai") // none left
	must(err)
	stop()
	must(s.Set("anthropic", "sk", ""))
	if want := "openai:>api openai:api>oauth openai:oauth>"; strings.Join(got, " ") != want {
		t.Errorf("heard %q, want %q", strings.Join(got, " "), want)
	}
}
