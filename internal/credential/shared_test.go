package credential_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/credential"
	"github.com/agentd/agentd/internal/store/postgres"
	"github.com/agentd/agentd/internal/store/postgres/pgtest"
)

// backend opens stores over one place that keeps credentials: each call
// of open is another process (or node) opening the same place.
type backend struct {
	name string
	open func(t *testing.T) *credential.Store
}

// backends are the file and, when AGENTD_TEST_POSTGRES names a server,
// a PostgreSQL schema shared by every store opened on it.
func backends(t *testing.T) []backend {
	path := filepath.Join(t.TempDir(), "credentials.json")
	out := []backend{{name: "file", open: func(t *testing.T) *credential.Store {
		t.Helper()
		s, err := credential.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}}}
	if os.Getenv(pgtest.Env) == "" {
		t.Log("PostgreSQL skipped: " + pgtest.Env + " is unset")
		return out
	}
	db := pgtest.Schema(t)
	return append(out, backend{name: "postgres", open: func(t *testing.T) *credential.Store {
		t.Helper()
		return sharedStore(t, db, filepath.Join(t.TempDir(), "none.json"))
	}})
}

// sharedStore is a node's store on the PostgreSQL database at db, having
// imported the file at path (if any).
func sharedStore(t *testing.T, db, path string) *credential.Store {
	t.Helper()
	return sharedStorePoll(t, db, path, 0)
}

// sharedStorePoll is sharedStore with the database's poll interval (0:
// its default).
func sharedStorePoll(t testing.TB, db, path string, poll time.Duration) *credential.Store {
	t.Helper()
	pg, err := postgres.Open(t.Context(), db, postgres.Options{Logger: quiet(), Poll: poll})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close() })
	s, err := credential.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Share(t.Context(), pg); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestConformance: what every place that keeps credentials promises, the
// same on the file and on PostgreSQL: keys and logins kept whole and read
// back by another opener, renamed, removed, refused when invalid, and the
// watchers told of each change of kind once the store holds it.
func TestConformance(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Run("keys", func(t *testing.T) { conformKeys(t, b) })
			t.Run("logins", func(t *testing.T) { conformLogins(t, b) })
			t.Run("watch", func(t *testing.T) { conformWatch(t, b) })
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func conformKeys(t *testing.T, b backend) {
	s := b.open(t)
	must(t, s.Set("k-anthropic", "sk-ant-secret", "work"))
	must(t, s.Set("k-openai", "sk-oai-secret", ""))
	if err := s.Set("k/bad", "k", ""); !errors.Is(err, credential.ErrInvalid) {
		t.Errorf("an invalid id: %v", err)
	}
	s2 := b.open(t)
	if key, label := s2.Key("k-anthropic"); key != "sk-ant-secret" || label != "work" {
		t.Errorf("another opener: %q %q", key, label)
	}
	if ok, err := s2.Label("k-anthropic", "home"); !ok || err != nil {
		t.Errorf("label: %v %v", ok, err)
	}
	if ok, _ := s2.Label("k-nobody", "x"); ok {
		t.Error("renamed a key that is not stored")
	}
	if ok, err := s2.Remove("k-openai"); !ok || err != nil {
		t.Errorf("remove: %v %v", ok, err)
	}
	if ok, _ := s2.Remove("k-openai"); ok {
		t.Error("removed a key twice")
	}
	s3 := b.open(t)
	if ids := strings.Join(s3.IDs(), ","); !strings.Contains(ids, "k-anthropic") || strings.Contains(ids, "k-openai") {
		t.Errorf("after remove: %v", ids)
	}
	if _, label := s3.Key("k-anthropic"); label != "home" {
		t.Errorf("label read by another opener: %q", label)
	}
	// A key replaced keeps no label it was not given; a login keeps one.
	must(t, s3.Put("k-anthropic", credential.Entry{Type: "api", Key: "sk-2"}))
	if e, _ := s3.Get("k-anthropic"); e.Key != "sk-2" || e.Label != "home" {
		t.Errorf("after Put: %v (label %q)", e, e.Label)
	}
}

func conformLogins(t *testing.T, b backend) {
	s := b.open(t)
	login := credential.Entry{Type: "oauth", Refresh: "r-1", Access: "a-1", Expires: 1700000000000, AccountID: "acct"}
	must(t, s.Put("l-anthropic", login))
	if err := s.Put("l-anthropic", credential.Entry{Type: "oauth", Refresh: "r"}); !errors.Is(err, credential.ErrInvalid) {
		t.Errorf("a login without its access token: %v", err)
	}
	got, ok := b.open(t).Get("l-anthropic")
	if !ok || got.Access != "a-1" || got.Refresh != "r-1" || got.Expires != 1700000000000 || got.AccountID != "acct" || got.Type != "oauth" {
		t.Errorf("another opener: %v %v", got, ok)
	}
}

func conformWatch(t *testing.T, b backend) {
	s := b.open(t)
	var got []string
	stop := s.Watch(func(c credential.Change) {
		if _, ok := s.Get(c.ID); ok != (c.Now != "") {
			t.Errorf("%v heard before the store holds it", c)
		}
		got = append(got, c.ID+":"+c.Was+">"+c.Now)
	})
	must(t, s.Set("w-openai", "sk-1", "a"))
	must(t, s.Set("w-openai", "sk-2", "a")) // the same kind
	_, err := s.Label("w-openai", "b")
	must(t, err)
	must(t, s.Put("w-openai", credential.Entry{Type: "oauth", Access: "x", Refresh: "r"}))
	_, err = s.Remove("w-openai")
	must(t, err)
	stop()
	must(t, s.Set("w-anthropic", "sk", ""))
	if want := "w-openai:>api w-openai:api>oauth w-openai:oauth>"; strings.Join(got, " ") != want {
		t.Errorf("heard %q, want %q", strings.Join(got, " "), want)
	}
}

// heard collects what a store's watchers are told, for a test to wait on.
type heard struct {
	mu   sync.Mutex
	seen []string
	more chan struct{}
}

func listen(s *credential.Store) *heard {
	h := &heard{more: make(chan struct{}, 1)}
	s.Watch(func(c credential.Change) {
		h.mu.Lock()
		h.seen = append(h.seen, c.ID+":"+c.Was+">"+c.Now)
		h.mu.Unlock()
		select {
		case h.more <- struct{}{}:
		default:
		}
	})
	return h
}

// wait returns once the watchers were told want, or fails the test.
func (h *heard) wait(t *testing.T, want string) {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		h.mu.Lock()
		seen := strings.Join(h.seen, " ")
		h.mu.Unlock()
		if strings.Contains(" "+seen+" ", " "+want+" ") {
			return
		}
		select {
		case <-h.more:
		case <-deadline.C:
			t.Fatalf("never heard %q; heard %q", want, seen)
		}
	}
}

// waitFor returns once cond holds, checked at each change heard and at
// the polls of the store below; it fails the test after 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("never: %s", what)
		}
	}
}

// TestSharedAcrossNodes: on PostgreSQL, a key stored through one node is
// what another node reads, and the other node's watchers hear of it (the
// provider list follows them), as they hear of a login replacing it and of
// its removal; a key replaced by another of the same kind is read there
// too. The stores never poll here: the change's notice is what tells them.
func TestSharedAcrossNodes(t *testing.T) {
	t.Parallel()
	db := pgtest.Schema(t)
	a := sharedStorePoll(t, db, filepath.Join(t.TempDir(), "a.json"), time.Hour)
	b := sharedStorePoll(t, db, filepath.Join(t.TempDir(), "b.json"), time.Hour)
	hb := listen(b)
	must(t, a.Set("openai", "sk-from-a", "ci"))
	hb.wait(t, "openai:>api")
	if key, label := b.Key("openai"); key != "sk-from-a" || label != "ci" {
		t.Errorf("b reads %q %q", key, label)
	}
	must(t, a.Set("openai", "sk-rotated", "ci"))
	waitFor(t, "b reads the rotated key", func() bool { k, _ := b.Key("openai"); return k == "sk-rotated" })
	must(t, b.Put("openai", credential.Entry{Type: "oauth", Access: "tok", Refresh: "r"}))
	waitFor(t, "a reads the login", func() bool { e, _ := a.Get("openai"); return e.Type == "oauth" })
	ha := listen(a)
	if _, err := b.Remove("openai"); err != nil {
		t.Fatal(err)
	}
	ha.wait(t, "openai:oauth>")
	if _, ok := a.Get("openai"); ok {
		t.Error("a still holds the removed entry")
	}
}

// TestShareImportsFile: a node's credential file is imported into the
// shared database at its first start there: an entry the database holds
// already wins unless the file's is newer; the file is then set aside,
// so that a key forgotten in the cluster is not brought back by the next
// start.
func TestShareImportsFile(t *testing.T) {
	t.Parallel()
	db := pgtest.Schema(t)
	dir := t.TempDir()
	a := sharedStore(t, db, filepath.Join(dir, "none.json"))
	must(t, a.Set("kept", "sk-db-newer", ""))
	must(t, a.Set("replaced", "sk-db-old", ""))
	// The files' entries, with their times: before and after the
	// database's.
	file := func(name, entries string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(entries), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	later := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	older := file("older.json", `{"kept":{"type":"api","key":"sk-file-old","time":1000},
		"only-file":{"type":"api","key":"sk-file-only","label":"mine","time":1000}}`)
	newer := file("newer.json", `{"replaced":{"type":"api","key":"sk-file-newer","time":`+later+`}}`)

	b := sharedStore(t, db, older)
	if _, err := os.Stat(older); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the imported file is still in place: %v", err)
	}
	if _, err := os.Stat(older + credential.ImportedSuffix); err != nil {
		t.Errorf("the imported file was not set aside: %v", err)
	}
	if k, _ := b.Key("kept"); k != "sk-db-newer" {
		t.Errorf("an older file's entry overwrote the database's: %q", k)
	}
	if k, l := b.Key("only-file"); k != "sk-file-only" || l != "mine" {
		t.Errorf("the file's own entry: %q %q", k, l)
	}
	c := sharedStore(t, db, newer)
	if k, _ := c.Key("replaced"); k != "sk-file-newer" {
		t.Errorf("a newer file's entry was not imported: %q", k)
	}
	waitFor(t, "a hears of the imports", func() bool { k, _ := a.Key("only-file"); return k == "sk-file-only" })

	_, err := b.Remove("only-file")
	must(t, err)
	d := sharedStore(t, db, older)
	if k, _ := d.Key("only-file"); k != "" {
		t.Errorf("a key forgotten in the cluster came back from the set-aside file: %q", k)
	}
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TestSharedPollCatchesLostNotice: a change whose notice never arrives (a
// row written with no NOTIFY, as when the listener was down) reaches the
// other nodes at their next poll.
func TestSharedPollCatchesLostNotice(t *testing.T) {
	t.Parallel()
	db := pgtest.Schema(t)
	s := sharedStorePoll(t, db, filepath.Join(t.TempDir(), "s.json"), 20*time.Millisecond)
	h := listen(s)
	conn, err := sql.Open("pgx", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), `INSERT INTO credentials (id, data, updated_ms) VALUES ('polled', '{"type":"api","key":"sk-polled"}', 0)`); err != nil {
		t.Fatal(err)
	}
	h.wait(t, "polled:>api")
	if k, _ := s.Key("polled"); k != "sk-polled" {
		t.Errorf("after the poll: %q", k)
	}
}
