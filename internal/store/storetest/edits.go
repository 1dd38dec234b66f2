package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// editFixture is a session of n user messages of two text parts each.
func editFixture(t *testing.T, s store.Store, n int) (core.Session, []core.Message, [][]core.Part) {
	t.Helper()
	sess := NewSession("/a", time.Now().UnixMilli())
	insertSession(t, s, sess)
	var msgs []core.Message
	var parts [][]core.Part
	mustTx(t, s, func(tx store.Tx) error {
		for range n {
			m := userMessage(sess.ID)
			m.RunID = "run_e"
			msgs = append(msgs, m)
			if err := tx.InsertMessage(ctx(t), m); err != nil {
				return err
			}
			var ps []core.Part
			for range 2 {
				p := textPart(m, "t")
				ps = append(ps, p)
				if err := tx.PutPart(ctx(t), p); err != nil {
					return err
				}
			}
			parts = append(parts, ps)
		}
		return nil
	})
	return sess, msgs, parts
}

func intactOf(t *testing.T, s store.Store, sessionID string, msgs []core.Message) []bool {
	t.Helper()
	out := make([]bool, len(msgs))
	for i, m := range msgs {
		ok, err := s.MessageIntact(ctx(t), sessionID, m.ID)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = ok
	}
	return out
}

// testRetireMessage: a deleted message and its parts are gone from every
// read but the messages around it stay; a second delete is ErrNotFound;
// a view through a later message taken before the delete is no longer
// intact, one taken after it is.
func testRetireMessage(t *testing.T, s store.Store, _ func() store.Store) {
	sess, msgs, parts := editFixture(t, s, 4)
	var gone []string
	mustTx(t, s, func(tx store.Tx) error {
		var err error
		gone, err = tx.RetireMessage(ctx(t), sess.ID, msgs[1].ID)
		return err
	})
	if len(gone) != 2 || gone[0] != parts[1][0].ID {
		t.Fatalf("retired parts %v", gone)
	}
	left, _ := s.Messages(ctx(t), sess.ID, store.MessageQuery{})
	if len(left) != 3 || left[0].Info.ID != msgs[0].ID || left[1].Info.ID != msgs[2].ID || len(left[1].Parts) != 2 {
		t.Fatalf("left %d messages", len(left))
	}
	if _, err := s.Message(ctx(t), sess.ID, msgs[1].ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a deleted message was read: %v", err)
	}
	if run, _ := s.RunMessages(ctx(t), "run_e"); len(run) != 3 {
		t.Errorf("run messages = %d", len(run))
	}
	err := s.Tx(ctx(t), func(tx store.Tx) error {
		_, err := tx.RetireMessage(ctx(t), sess.ID, msgs[1].ID)
		return err
	})
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleting a deleted message: %v", err)
	}
	err = s.Tx(ctx(t), func(tx store.Tx) error {
		_, err := tx.RetireMessage(ctx(t), "ses_other", msgs[0].ID)
		return err
	})
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleting a message through another session: %v", err)
	}
	// A view through the first (before the deleted one) stays intact;
	// views through the later ones may predate the delete.
	if got := intactOf(t, s, sess.ID, []core.Message{msgs[0], msgs[2], msgs[3]}); !got[0] || got[1] || got[2] {
		t.Fatalf("intact after the delete: %v, want [true false false]", got)
	}
	later := userMessage(sess.ID)
	mustTx(t, s, func(tx store.Tx) error { return tx.InsertMessage(ctx(t), later) })
	if got := intactOf(t, s, sess.ID, []core.Message{later}); !got[0] {
		t.Fatal("a message written after the delete is not intact")
	}
}

// testRetirePart: a deleted part is gone, its message stays with the
// others; an unknown part is ErrNotFound.
func testRetirePart(t *testing.T, s store.Store, _ func() store.Store) {
	sess, msgs, parts := editFixture(t, s, 2)
	mustTx(t, s, func(tx store.Tx) error { return tx.RetirePart(ctx(t), sess.ID, msgs[0].ID, parts[0][1].ID) })
	m, err := s.Message(ctx(t), sess.ID, msgs[0].ID)
	if err != nil || len(m.Parts) != 1 || m.Parts[0].ID != parts[0][0].ID {
		t.Fatalf("message after the part's delete: %d parts, %v", len(m.Parts), err)
	}
	for _, bad := range [][2]string{{msgs[0].ID, parts[0][1].ID}, {msgs[1].ID, parts[0][0].ID}, {msgs[0].ID, "prt_none"}} {
		err := s.Tx(ctx(t), func(tx store.Tx) error { return tx.RetirePart(ctx(t), sess.ID, bad[0], bad[1]) })
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("deleting part %s of %s: %v", bad[1], bad[0], err)
		}
	}
	if got := intactOf(t, s, sess.ID, msgs); got[0] || got[1] {
		t.Fatalf("intact after a part's delete: %v, want [false false]", got)
	}
}

// testKeepPart: the former version of a changed part stays as a
// tombstone no read returns; the part keeps its id and place.
func testKeepPart(t *testing.T, s store.Store, _ func() store.Store) {
	sess, msgs, parts := editFixture(t, s, 2)
	changed := parts[0][0]
	changed.Text = "corrected"
	mustTx(t, s, func(tx store.Tx) error {
		if err := tx.KeepPart(ctx(t), sess.ID, msgs[0].ID, changed.ID, core.NewID(core.PrefixPart, true)); err != nil {
			return err
		}
		return tx.PutPart(ctx(t), changed)
	})
	m, err := s.Message(ctx(t), sess.ID, msgs[0].ID)
	if err != nil || len(m.Parts) != 2 || m.Parts[0].ID != changed.ID || m.Parts[0].Text != "corrected" {
		t.Fatalf("message after the change: %+v, %v", m.Parts, err)
	}
	err = s.Tx(ctx(t), func(tx store.Tx) error {
		return tx.KeepPart(ctx(t), sess.ID, msgs[0].ID, "prt_none", core.NewID(core.PrefixPart, true))
	})
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("keeping an unknown part: %v", err)
	}
	if got := intactOf(t, s, sess.ID, msgs); got[0] || got[1] {
		t.Fatalf("intact after a change: %v, want [false false]", got)
	}
}
