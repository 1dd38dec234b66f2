package credential_test

import (
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/credential"
	"github.com/agentd/agentd/internal/store/postgres/pgtest"
)

// BenchmarkSharedPropagation times a key stored through one node until
// another node's watchers hear of it (the notice's path; the stores do not
// poll). Each iteration is two changes: it stores a key, then forgets it.
func BenchmarkSharedPropagation(b *testing.B) {
	db := pgtest.Schema(b)
	a := sharedStorePoll(b, db, filepath.Join(b.TempDir(), "a.json"), time.Hour)
	other := sharedStorePoll(b, db, filepath.Join(b.TempDir(), "b.json"), time.Hour)
	heardCh := make(chan credential.Change, 16)
	other.Watch(func(c credential.Change) { heardCh <- c })
	b.ResetTimer()
	for i := range b.N {
		id := "p" + strconv.Itoa(i)
		if err := a.Set(id, "sk", ""); err != nil {
			b.Fatal(err)
		}
		for c := range heardCh {
			if c.ID == id && c.Now == "api" {
				break
			}
		}
		if _, err := a.Remove(id); err != nil {
			b.Fatal(err)
		}
		for c := range heardCh {
			if c.ID == id && c.Now == "" {
				break
			}
		}
	}
}
