package sqlite_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/storetest"
)

// BenchmarkMessageIntact is the store's part of a run's start when the
// engine kept the session's history: is the view through the last message
// still true? The session has 500 messages of 4 parts, and 50 tombstones
// of a revert (edits' tombstones are what the check looks for).
func BenchmarkMessageIntact(b *testing.B) {
	s := openBench(b, "OFF")
	ctx := context.Background()
	sess := storetest.NewSession("/w", time.Now().UnixMilli())
	var last core.Message
	err := s.Tx(ctx, func(tx store.Tx) error {
		if err := tx.InsertSession(ctx, sess); err != nil {
			return err
		}
		for i := range 550 {
			m := core.Message{ID: core.NewID(core.PrefixMessage, false), SessionID: sess.ID, Role: core.RoleUser, Created: int64(i),
				Agent: "build", Model: core.ModelRef{ProviderID: "agentd", ModelID: "scripted"}}
			if err := tx.InsertMessage(ctx, m); err != nil {
				return err
			}
			for range 4 {
				p := core.Part{ID: core.NewID(core.PrefixPart, false), SessionID: sess.ID, MessageID: m.ID, Type: core.PartText, Text: "some text of a turn"}
				if err := tx.PutPart(ctx, p); err != nil {
					return err
				}
			}
			if i == 499 {
				last = m
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	err = s.Tx(ctx, func(tx store.Tx) error {
		msgs, err := tx.Messages(ctx, sess.ID, store.MessageQuery{})
		if err != nil {
			return err
		}
		_, _, err = tx.RetireFrom(ctx, sess.ID, msgs[500].Info.ID, "", "revert:x")
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		ok, err := s.MessageIntact(ctx, sess.ID, last.ID)
		if err != nil || !ok {
			b.Fatalf("%v %v", ok, err)
		}
	}
}
