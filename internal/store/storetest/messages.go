package storetest

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func userMessage(sessionID string) core.Message {
	return core.Message{ID: core.NewID(core.PrefixMessage, false), SessionID: sessionID, Role: core.RoleUser,
		Created: time.Now().UnixMilli(), Agent: "build", Model: core.ModelRef{ProviderID: "agentd", ModelID: "scripted"}}
}

func textPart(m core.Message, text string) core.Part {
	return core.Part{ID: core.NewID(core.PrefixPart, false), SessionID: m.SessionID, MessageID: m.ID, Type: core.PartText, Text: text}
}

func testMessagesAndParts(t *testing.T, s store.Store, _ func() store.Store) {
	sess := NewSession("/a", time.Now().UnixMilli())
	insertSession(t, s, sess)
	u := userMessage(sess.ID)
	p1 := textPart(u, "hello")
	a := core.Message{ID: core.NewID(core.PrefixMessage, false), SessionID: sess.ID, Role: core.RoleAssistant,
		Created: time.Now().UnixMilli(), ParentID: u.ID, ProviderID: "agentd", ModelID: "scripted", Mode: "build",
		Tokens: core.Tokens{Input: 3, Cache: core.CacheTokens{Read: 2}}}
	tool := core.Part{ID: core.NewID(core.PrefixPart, false), SessionID: sess.ID, MessageID: a.ID, Type: core.PartTool,
		CallID: "call_1", Tool: "echo", State: core.ToolState{Status: core.ToolRunning, Input: json.RawMessage(`{"x":1}`), Time: core.PartTime{Start: 5}}}
	mustTx(t, s, func(tx store.Tx) error {
		if err := tx.InsertMessage(ctx(t), u); err != nil {
			return err
		}
		if err := tx.PutPart(ctx(t), p1); err != nil {
			return err
		}
		if err := tx.PutMessage(ctx(t), a); err != nil {
			return err
		}
		return tx.PutPart(ctx(t), tool)
	})
	// Upsert replaces in place.
	tool.State = core.ToolState{Status: core.ToolCompleted, Input: json.RawMessage(`{"x":1}`), Output: "ok", Title: "echo", Time: core.PartTime{Start: 5, End: 6}}
	a.Completed = time.Now().UnixMilli()
	mustTx(t, s, func(tx store.Tx) error {
		if err := tx.PutMessage(ctx(t), a); err != nil {
			return err
		}
		return tx.PutPart(ctx(t), tool)
	})
	msgs, err := s.Messages(ctx(t), sess.ID, store.MessageQuery{})
	if err != nil {
		t.Fatal(err)
	}
	u.Seq, a.Seq = 1, 2
	want := []core.MessageWithParts{{Info: u, Parts: []core.Part{p1}}, {Info: a, Parts: []core.Part{tool}}}
	if diff := cmp.Diff(want, msgs, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	one, err := s.Message(ctx(t), sess.ID, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want[1], one, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("message (-want +got):\n%s", diff)
	}
	if _, err := s.Message(ctx(t), "ses_other", a.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("message of another session: err = %v", err)
	}
	err = s.Tx(ctx(t), func(tx store.Tx) error { return tx.InsertMessage(ctx(t), u) })
	if !errors.Is(err, store.ErrConflict) {
		t.Errorf("duplicate message: err = %v, want ErrConflict", err)
	}
	// Messages tied to a run, found without reading parts.
	u2 := userMessage(sess.ID)
	u2.RunID = "run_x"
	a2 := a
	a2.ID, a2.RunID = core.NewID(core.PrefixMessage, false), "run_x"
	mustTx(t, s, func(tx store.Tx) error {
		if err := tx.InsertMessage(ctx(t), u2); err != nil {
			return err
		}
		return tx.PutMessage(ctx(t), a2)
	})
	u2.Seq, a2.Seq = 3, 4
	rm, err := s.RunMessages(ctx(t), "run_x")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]core.Message{u2, a2}, rm); diff != "" {
		t.Errorf("run messages (-want +got):\n%s", diff)
	}
	// The newest of a role, with its parts; another run's are not it.
	tool2 := tool
	tool2.ID, tool2.MessageID = core.NewID(core.PrefixPart, false), a2.ID
	mustTx(t, s, func(tx store.Tx) error { return tx.PutPart(ctx(t), tool2) })
	last, err := s.LastRunMessage(ctx(t), "run_x", core.RoleAssistant)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(core.MessageWithParts{Info: a2, Parts: []core.Part{tool2}}, last, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("last assistant message of the run (-want +got):\n%s", diff)
	}
	a3 := core.Message{ID: core.NewID(core.PrefixMessage, false), SessionID: sess.ID, Role: core.RoleAssistant, RunID: "run_x"}
	other := core.Message{ID: core.NewID(core.PrefixMessage, false), SessionID: sess.ID, Role: core.RoleAssistant, RunID: "run_y"}
	mustTx(t, s, func(tx store.Tx) error {
		if err := tx.PutMessage(ctx(t), a3); err != nil {
			return err
		}
		return tx.PutMessage(ctx(t), other)
	})
	if last, err := s.LastRunMessage(ctx(t), "run_x", core.RoleAssistant); err != nil || last.Info.ID != a3.ID {
		t.Errorf("last assistant message of the run after another: %s, %v; want %s", last.Info.ID, err, a3.ID)
	}
	if last, err := s.LastRunMessage(ctx(t), "run_x", core.RoleUser); err != nil || last.Info.ID != u2.ID {
		t.Errorf("last user message of the run: %s, %v; want %s", last.Info.ID, err, u2.ID)
	}
	if _, err := s.LastRunMessage(ctx(t), "run_none", core.RoleAssistant); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("run without messages: err = %v, want ErrNotFound", err)
	}
}

func testMessagePaging(t *testing.T, s store.Store, _ func() store.Store) {
	sess := NewSession("/a", time.Now().UnixMilli())
	insertSession(t, s, sess)
	var ids []string
	mustTx(t, s, func(tx store.Tx) error {
		for range 10 {
			m := userMessage(sess.ID)
			ids = append(ids, m.ID)
			if err := tx.InsertMessage(ctx(t), m); err != nil {
				return err
			}
		}
		return nil
	})
	page, _ := s.Messages(ctx(t), sess.ID, store.MessageQuery{Limit: 3})
	if len(page) != 3 || page[0].Info.ID != ids[7] || page[2].Info.ID != ids[9] {
		t.Fatalf("last page wrong: %d", len(page))
	}
	between, _ := s.Messages(ctx(t), sess.ID, store.MessageQuery{After: ids[2], Before: ids[5]})
	if len(between) != 2 || between[0].Info.ID != ids[3] {
		t.Fatalf("after/before page wrong: %d", len(between))
	}
	since, _ := s.Messages(ctx(t), sess.ID, store.MessageQuery{Since: ids[8]})
	if len(since) != 2 || since[0].Info.ID != ids[8] {
		t.Fatalf("since page wrong: %d", len(since))
	}
	page, _ = s.Messages(ctx(t), sess.ID, store.MessageQuery{Limit: 3, Before: ids[7]})
	if len(page) != 3 || page[0].Info.ID != ids[4] || page[2].Info.ID != ids[6] {
		t.Fatalf("previous page wrong")
	}
	if page[0].Parts == nil {
		t.Error("parts must be an empty list, not null")
	}
}

// testMessageSeqs: the positions of a session's live messages after a
// place, in order; retired messages and other sessions' are left out.
func testMessageSeqs(t *testing.T, s store.Store, _ func() store.Store) {
	sess, other := NewSession("/a", time.Now().UnixMilli()), NewSession("/b", time.Now().UnixMilli())
	insertSession(t, s, sess)
	insertSession(t, s, other)
	var ids []string
	mustTx(t, s, func(tx store.Tx) error {
		for range 5 {
			m := userMessage(sess.ID)
			ids = append(ids, m.ID)
			if err := tx.InsertMessage(ctx(t), m); err != nil {
				return err
			}
			if err := tx.InsertMessage(ctx(t), userMessage(other.ID)); err != nil {
				return err
			}
		}
		return nil
	})
	idsOf := func(after int64) ([]string, []store.MessageSeq) {
		t.Helper()
		seqs, err := s.MessageSeqs(ctx(t), sess.ID, after)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for i, m := range seqs {
			if i > 0 && m.Seq <= seqs[i-1].Seq {
				t.Fatalf("positions out of order: %v", seqs)
			}
			out = append(out, m.ID)
		}
		return out, seqs
	}
	got, all := idsOf(0)
	if diff := cmp.Diff(ids, got); diff != "" {
		t.Fatalf("all messages (-want +got):\n%s", diff)
	}
	if got, _ := idsOf(all[1].Seq); !cmp.Equal(got, ids[2:]) {
		t.Fatalf("after the second: %v, want %v", got, ids[2:])
	}
	if got, _ := idsOf(all[4].Seq); len(got) != 0 {
		t.Fatalf("after the last: %v", got)
	}
	mustTx(t, s, func(tx store.Tx) error {
		_, _, err := tx.RetireFrom(ctx(t), sess.ID, ids[3], "", "revert-1")
		return err
	})
	if got, _ := idsOf(0); !cmp.Equal(got, ids[:3]) {
		t.Fatalf("after retiring the fourth: %v, want %v", got, ids[:3])
	}
}

// testMessageIntact: a message is intact until a revert retires it or one
// of its parts.
func testMessageIntact(t *testing.T, s store.Store, _ func() store.Store) {
	sess := NewSession("/a", time.Now().UnixMilli())
	insertSession(t, s, sess)
	var msgs []core.Message
	var parts []core.Part
	mustTx(t, s, func(tx store.Tx) error {
		for range 3 {
			m := userMessage(sess.ID)
			msgs = append(msgs, m)
			if err := tx.InsertMessage(ctx(t), m); err != nil {
				return err
			}
			for range 2 {
				p := textPart(m, "t")
				parts = append(parts, p)
				if err := tx.PutPart(ctx(t), p); err != nil {
					return err
				}
			}
		}
		return nil
	})
	intact := func(m core.Message) bool {
		t.Helper()
		ok, err := s.MessageIntact(ctx(t), sess.ID, m.ID)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !intact(msgs[0]) || !intact(msgs[1]) || !intact(msgs[2]) {
		t.Fatal("a fresh message is not intact")
	}
	if ok, err := s.MessageIntact(ctx(t), "ses_other", msgs[0].ID); ok || err != nil {
		t.Fatalf("another session's message: %v %v", ok, err)
	}
	// From the second message's second part on: that message stays, less
	// a part; the third goes.
	mustTx(t, s, func(tx store.Tx) error {
		_, _, err := tx.RetireFrom(ctx(t), sess.ID, msgs[1].ID, parts[3].ID, "revert-1")
		return err
	})
	if !intact(msgs[0]) || intact(msgs[1]) || intact(msgs[2]) {
		t.Fatalf("after a revert: intact %v %v %v, want true false false", intact(msgs[0]), intact(msgs[1]), intact(msgs[2]))
	}
}

// testRetireFrom: retired messages and parts stay in the store but no
// read returns them; a partial retirement keeps the message and its
// earlier parts.
func testRetireFrom(t *testing.T, s store.Store, _ func() store.Store) {
	sess := NewSession("/a", time.Now().UnixMilli())
	insertSession(t, s, sess)
	var msgs []core.Message
	var parts [][]core.Part
	mustTx(t, s, func(tx store.Tx) error {
		for range 4 {
			m := userMessage(sess.ID)
			m.RunID = "run_x"
			msgs = append(msgs, m)
			if err := tx.InsertMessage(ctx(t), m); err != nil {
				return err
			}
			var ps []core.Part
			for range 3 {
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
	var gotMsgs, gotParts []string
	mustTx(t, s, func(tx store.Tx) error {
		var err error
		gotMsgs, gotParts, err = tx.RetireFrom(ctx(t), sess.ID, msgs[1].ID, parts[1][1].ID, "revert-1")
		return err
	})
	if len(gotMsgs) != 2 || gotMsgs[0] != msgs[2].ID || len(gotParts) != 2 || gotParts[0] != parts[1][1].ID {
		t.Fatalf("retired %v and parts %v", gotMsgs, gotParts)
	}
	left, _ := s.Messages(ctx(t), sess.ID, store.MessageQuery{})
	if len(left) != 2 || len(left[1].Parts) != 1 || left[1].Parts[0].ID != parts[1][0].ID {
		t.Fatalf("left %d messages", len(left))
	}
	if _, err := s.Message(ctx(t), sess.ID, msgs[3].ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a retired message was read: %v", err)
	}
	if run, _ := s.RunMessages(ctx(t), "run_x"); len(run) != 2 {
		t.Errorf("run messages = %d", len(run))
	}
	if m, _ := s.Message(ctx(t), sess.ID, msgs[1].ID); len(m.Parts) != 1 {
		t.Errorf("partly retired message has %d parts", len(m.Parts))
	}
	err := s.Tx(ctx(t), func(tx store.Tx) error {
		_, _, err := tx.RetireFrom(ctx(t), sess.ID, msgs[3].ID, "", "again")
		return err
	})
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("retiring from a retired message: %v", err)
	}
	mustTx(t, s, func(tx store.Tx) error {
		_, _, err := tx.RetireFrom(ctx(t), sess.ID, msgs[0].ID, "", "revert-2")
		return err
	})
	if left, _ := s.Messages(ctx(t), sess.ID, store.MessageQuery{}); len(left) != 0 {
		t.Errorf("after retiring from the first: %d left", len(left))
	}
}

// testMessagesByBytes: a byte budget keeps the newest messages whole and
// leaves out the older ones (those without parts too).
func testMessagesByBytes(t *testing.T, s store.Store, _ func() store.Store) {
	sess := NewSession("/a", time.Now().UnixMilli())
	insertSession(t, s, sess)
	big := strings.Repeat("x", 100_000)
	var ids []string
	mustTx(t, s, func(tx store.Tx) error {
		for i := range 10 {
			m := userMessage(sess.ID)
			ids = append(ids, m.ID)
			if err := tx.InsertMessage(ctx(t), m); err != nil {
				return err
			}
			if i == 3 {
				continue // a message without parts
			}
			for range 2 {
				if err := tx.PutPart(ctx(t), textPart(m, big)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	page, err := s.Messages(ctx(t), sess.ID, store.MessageQuery{MaxBytes: 450_000})
	if err != nil {
		t.Fatal(err)
	}
	// Each message holds ~200 kB: the third from the newest takes the
	// total past the budget and is the oldest returned, whole.
	if len(page) != 3 || page[0].Info.ID != ids[7] || page[2].Info.ID != ids[9] || len(page[0].Parts) != 2 {
		t.Fatalf("got %d messages", len(page))
	}
	all, _ := s.Messages(ctx(t), sess.ID, store.MessageQuery{})
	if len(all) != 10 || len(all[3].Parts) != 0 || len(all[4].Parts) != 2 {
		t.Errorf("without a budget: %d messages", len(all))
	}
}

// testServerOrder: messages and parts come back in the order the server
// stored them, whatever their ids say (a client may choose ids that sort
// anywhere).
func testServerOrder(t *testing.T, s store.Store, _ func() store.Store) {
	sess := NewSession("/a", time.Now().UnixMilli())
	insertSession(t, s, sess)
	late := userMessage(sess.ID)
	late.ID = "msg_ffffffffffff" + late.ID[16:] // sorts after every real id
	early := userMessage(sess.ID)
	mustTx(t, s, func(tx store.Tx) error {
		if err := tx.InsertMessage(ctx(t), late); err != nil {
			return err
		}
		for _, text := range []string{"z", "a"} {
			p := textPart(late, text)
			if text == "z" {
				p.ID = "prt_ffffffffffff" + p.ID[16:]
			}
			if err := tx.PutPart(ctx(t), p); err != nil {
				return err
			}
		}
		return tx.InsertMessage(ctx(t), early)
	})
	msgs, err := s.Messages(ctx(t), sess.ID, store.MessageQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || msgs[0].Info.ID != late.ID || msgs[1].Info.ID != early.ID || msgs[0].Info.Seq >= msgs[1].Info.Seq {
		t.Fatalf("messages out of the server's order: %+v", msgs)
	}
	if msgs[0].Parts[0].Text != "z" || msgs[0].Parts[1].Text != "a" {
		t.Errorf("parts out of the server's order: %q, %q", msgs[0].Parts[0].Text, msgs[0].Parts[1].Text)
	}
	after, _ := s.Messages(ctx(t), sess.ID, store.MessageQuery{After: late.ID})
	if len(after) != 1 || after[0].Info.ID != early.ID {
		t.Errorf("messages after the first stored: %d", len(after))
	}
	since, _ := s.Messages(ctx(t), sess.ID, store.MessageQuery{Since: early.ID})
	if len(since) != 1 {
		t.Errorf("messages since the last stored: %d", len(since))
	}
}

// testScopedIDs: a message or part id of one session can never be
// written from another; the upsert answers ErrConflict and changes
// nothing.
func testScopedIDs(t *testing.T, s store.Store, _ func() store.Store) {
	a, b := NewSession("/a", time.Now().UnixMilli()), NewSession("/b", time.Now().UnixMilli())
	insertSession(t, s, a)
	insertSession(t, s, b)
	ma, mb := userMessage(a.ID), userMessage(b.ID)
	pa := textPart(ma, "mine")
	mustTx(t, s, func(tx store.Tx) error {
		if err := tx.InsertMessage(ctx(t), ma); err != nil {
			return err
		}
		if err := tx.InsertMessage(ctx(t), mb); err != nil {
			return err
		}
		return tx.PutPart(ctx(t), pa)
	})
	steal := pa
	steal.SessionID, steal.MessageID, steal.Text = b.ID, mb.ID, "stolen"
	if err := s.Tx(ctx(t), func(tx store.Tx) error { return tx.PutPart(ctx(t), steal) }); !errors.Is(err, store.ErrConflict) {
		t.Errorf("part id of another session: err = %v, want ErrConflict", err)
	}
	other := ma
	other.SessionID = b.ID
	if err := s.Tx(ctx(t), func(tx store.Tx) error { return tx.PutMessage(ctx(t), other) }); !errors.Is(err, store.ErrConflict) {
		t.Errorf("message id of another session: err = %v, want ErrConflict", err)
	}
	got, err := s.Message(ctx(t), a.ID, ma.ID)
	if err != nil || len(got.Parts) != 1 || got.Parts[0].Text != "mine" {
		t.Errorf("the first session's message changed: %+v %v", got, err)
	}
}
