package msgedit_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/msgedit"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/sqlite"
	"github.com/agentd/agentd/internal/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fixture is a session with one user message of two text parts.
func fixture(t *testing.T) (store.Store, core.Session, core.Message, []core.Part) {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "agentd.db"), sqlite.Options{Synchronous: "OFF"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	sess := storetest.NewSession("/w", time.Now().UnixMilli())
	m := core.Message{ID: core.NewID(core.PrefixMessage, false), SessionID: sess.ID, Role: core.RoleUser, Created: 1,
		Agent: "build", Model: core.ModelRef{ProviderID: "agentd", ModelID: "scripted"}}
	parts := []core.Part{
		{ID: core.NewID(core.PrefixPart, false), SessionID: sess.ID, MessageID: m.ID, Type: core.PartText, Text: "one"},
		{ID: core.NewID(core.PrefixPart, false), SessionID: sess.ID, MessageID: m.ID, Type: core.PartReasoning, Text: "two"},
	}
	err = st.Tx(t.Context(), func(tx store.Tx) error {
		if err := tx.InsertSession(t.Context(), sess); err != nil {
			return err
		}
		if err := tx.InsertMessage(t.Context(), m); err != nil {
			return err
		}
		for _, p := range parts {
			if err := tx.PutPart(t.Context(), p); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return st, sess, m, parts
}

// TestBusy: nothing changes while the session has a run that is not
// over, a revert in progress or a revert point, and nothing was written.
func TestBusy(t *testing.T) {
	t.Parallel()
	for name, arrange := range map[string]func(tx store.Tx, sess core.Session) error{
		"active run": func(tx store.Tx, sess core.Session) error {
			return tx.InsertRun(t.Context(), core.Run{ID: core.NewID(core.PrefixRun, false), SessionID: sess.ID, State: core.RunQueued, UserMessageID: "msg_x", Time: core.RunTime{Created: 1}})
		},
		"revert in progress": func(tx store.Tx, sess core.Session) error {
			return tx.PutRevertJournal(t.Context(), store.RevertJournal{SessionID: sess.ID, ID: "rev_1", Owner: "n", Expires: 1, Data: []byte("{}")})
		},
		"revert point": func(tx store.Tx, sess core.Session) error {
			sess.Revert = &core.SessionRevert{MessageID: "msg_x"}
			return tx.UpdateSession(t.Context(), sess)
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st, sess, m, parts := fixture(t)
			if err := st.Tx(t.Context(), func(tx store.Tx) error { return arrange(tx, sess) }); err != nil {
				t.Fatal(err)
			}
			var busy *msgedit.BusyError
			if err := msgedit.DeleteMessage(t.Context(), st, sess.ID, m.ID); !errors.As(err, &busy) {
				t.Errorf("delete message: %v", err)
			}
			if err := msgedit.DeletePart(t.Context(), st, sess.ID, m.ID, parts[0].ID); !errors.As(err, &busy) {
				t.Errorf("delete part: %v", err)
			}
			in := parts[0]
			in.Text = "changed"
			if _, err := msgedit.UpdatePart(t.Context(), st, in); !errors.As(err, &busy) {
				t.Errorf("update part: %v", err)
			}
			got, err := st.Message(t.Context(), sess.ID, m.ID)
			if err != nil || len(got.Parts) != 2 || got.Parts[0].Text != "one" {
				t.Errorf("the message changed: %+v %v", got.Parts, err)
			}
		})
	}
}

// TestUpdatePart: only the text changes; the part keeps its id and place.
func TestUpdatePart(t *testing.T) {
	t.Parallel()
	st, sess, m, parts := fixture(t)
	in := parts[1]
	in.Text, in.Synthetic = "changed", true
	out, err := msgedit.UpdatePart(t.Context(), st, in)
	if err != nil || out.Text != "changed" || out.Synthetic || out.ID != parts[1].ID {
		t.Fatalf("update: %+v %v", out, err)
	}
	got, _ := st.Message(t.Context(), sess.ID, m.ID)
	if len(got.Parts) != 2 || got.Parts[1].Text != "changed" || got.Parts[0].Text != "one" {
		t.Errorf("message after the change: %+v", got.Parts)
	}
	in.ID = "prt_none"
	if _, err := msgedit.UpdatePart(t.Context(), st, in); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("update of an unknown part: %v", err)
	}
}
