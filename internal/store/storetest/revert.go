package storetest

import (
	"errors"
	"testing"

	"github.com/agentd/agentd/internal/store"
)

// testRevertJournal: a session holds one revert journal at most; it is
// read back as written, listed by expiry, taken over only while it is the
// same revert, deleted only by its own id, survives a reopen, and goes
// with its session.
func testRevertJournal(t *testing.T, s store.Store, reopen func() store.Store) {
	a, b := NewSession("/w", 1), NewSession("/w", 2)
	insertSession(t, s, a)
	insertSession(t, s, b)
	if _, err := s.RevertJournal(ctx(t), a.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("journal of a session with none: %v", err)
	}
	ja := store.RevertJournal{SessionID: a.ID, ID: "rv1", Owner: "n1", Expires: 100, Data: []byte(`{"kind":"revert"}`)}
	jb := store.RevertJournal{SessionID: b.ID, ID: "rv2", Owner: "n2", Expires: 50, Data: []byte(`{}`)}
	mustTx(t, s, func(tx store.Tx) error {
		if err := tx.PutRevertJournal(ctx(t), ja); err != nil {
			return err
		}
		return tx.PutRevertJournal(ctx(t), jb)
	})
	err := s.Tx(ctx(t), func(tx store.Tx) error {
		return tx.PutRevertJournal(ctx(t), store.RevertJournal{SessionID: a.ID, ID: "rv3", Owner: "n1", Expires: 1, Data: []byte(`{}`)})
	})
	if !errors.Is(err, store.ErrConflict) {
		t.Errorf("a second journal for one session: %v, want ErrConflict", err)
	}
	revertJournalKept(t, reopen(), a.ID, b.ID)
}

// revertJournalKept goes on with testRevertJournal after a reopen.
func revertJournalKept(t *testing.T, s store.Store, a, b string) {
	got, err := s.RevertJournal(ctx(t), a)
	if err != nil || got.ID != "rv1" || got.Owner != "n1" || got.Expires != 100 || string(got.Data) != `{"kind":"revert"}` {
		t.Fatalf("read back %+v %v", got, err)
	}
	list, err := s.RevertJournals(ctx(t), 101)
	if err != nil || len(list) != 2 || list[0].ID != "rv2" || list[1].ID != "rv1" {
		t.Fatalf("expired before 101: %+v %v", list, err)
	}
	if list, _ := s.RevertJournals(ctx(t), 100); len(list) != 1 || list[0].ID != "rv2" {
		t.Errorf("expired before 100: %+v", list)
	}
	mustTx(t, s, func(tx store.Tx) error {
		if err := tx.TakeRevertJournal(ctx(t), a, "other", "n3", 500); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("take over another revert: %v", err)
		}
		if err := tx.TakeRevertJournal(ctx(t), a, "rv1", "n3", 500); err != nil {
			return err
		}
		if err := tx.DeleteRevertJournal(ctx(t), a, "other"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("delete by another id: %v", err)
		}
		return nil
	})
	if got, _ := s.RevertJournal(ctx(t), a); got.Owner != "n3" || got.Expires != 500 {
		t.Errorf("after a takeover: %+v", got)
	}
	mustTx(t, s, func(tx store.Tx) error { return tx.DeleteRevertJournal(ctx(t), a, "rv1") })
	if _, err := s.RevertJournal(ctx(t), a); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after delete: %v", err)
	}
	mustTx(t, s, func(tx store.Tx) error { return tx.DeleteSession(ctx(t), b) })
	if list, _ := s.RevertJournals(ctx(t), 1<<62); len(list) != 0 {
		t.Errorf("journals after their sessions went: %+v", list)
	}
}
