package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/sqlite"
	"github.com/agentd/agentd/internal/store/storetest"
)

func openBench(b *testing.B, sync string) *sqlite.Store {
	b.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), sqlite.Options{Synchronous: sync})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkAppendEvent measures one transaction that writes a part and its
// event, the engine's most common write.
func BenchmarkAppendEvent(b *testing.B) {
	for _, sync := range []string{"FULL", "NORMAL"} {
		b.Run(sync, func(b *testing.B) {
			s := openBench(b, sync)
			ctx := context.Background()
			sess := storetest.NewSession("/b", time.Now().UnixMilli())
			msg := core.Message{ID: core.NewID(core.PrefixMessage, false), SessionID: sess.ID, Role: core.RoleAssistant}
			s.Tx(ctx, func(tx store.Tx) error {
				if err := tx.InsertSession(ctx, sess); err != nil {
					return err
				}
				return tx.InsertMessage(ctx, msg)
			})
			part := core.Part{ID: core.NewID(core.PrefixPart, false), SessionID: sess.ID, MessageID: msg.ID, Type: core.PartText, Text: "hello"}
			b.ReportAllocs()
			for b.Loop() {
				err := s.Tx(ctx, func(tx store.Tx) error {
					if err := tx.PutPart(ctx, part); err != nil {
						return err
					}
					return tx.AppendEvent(ctx, core.MustEvent(sess.ID, core.EventPartUpdated, map[string]any{"part": part}))
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// seedStatus makes 1,000 sessions of which 100 have a running run, the
// others a finished one.
func seedStatus(b *testing.B, s *sqlite.Store) []string {
	ctx := context.Background()
	var ids []string
	now := time.Now().UnixMilli()
	err := s.Tx(ctx, func(tx store.Tx) error {
		for i := range 1000 {
			sess := storetest.NewSession("/b", now)
			ids = append(ids, sess.ID)
			if err := tx.InsertSession(ctx, sess); err != nil {
				return err
			}
			r := core.Run{ID: core.NewID(core.PrefixRun, false), SessionID: sess.ID, State: core.RunSucceeded, Time: core.RunTime{Created: now, Ended: now}}
			if i%10 == 0 {
				r.State, r.Time.Ended = core.RunRunning, 0
			}
			if err := tx.InsertRun(ctx, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return ids
}

func BenchmarkStatusRead(b *testing.B) {
	s := openBench(b, "")
	ids := seedStatus(b, s)
	ctx := context.Background()
	b.Run("session", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := s.SessionStatus(ctx, ids[i%len(ids)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("session-parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				if _, err := s.SessionStatus(ctx, ids[i%len(ids)]); err != nil {
					b.Error(err)
					return
				}
				i++
			}
		})
	})
	b.Run("list", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m, err := s.ActiveStatuses(ctx)
			if err != nil || len(m) != 100 {
				b.Fatalf("%d %v", len(m), err)
			}
		}
	})
}

// fill100k appends 100,000 events of 50 sessions, in order.
func fill100k(b *testing.B, s store.Store) {
	ctx := context.Background()
	for i := 0; i < 100_000; i += 5000 {
		err := s.Tx(ctx, func(tx store.Tx) error {
			for j := range 5000 {
				if err := tx.AppendEvent(ctx, core.MustEvent(fmt.Sprintf("ses_%d", j%50), core.EventPartUpdated, map[string]any{"i": i + j, "text": "some streamed text of a typical size"})); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSessionReplay100k reads one session's 2,000 events from the
// start of a 100,000-event log, in pages, as a session stream that fell
// behind the in-memory ring does: the log has no per-session index (it
// cost every event insert more than this costs a rare replay), so it
// walks the log from the cursor.
func BenchmarkSessionReplay100k(b *testing.B) {
	s := openBench(b, "OFF")
	fill100k(b, s)
	b.ReportAllocs()
	for b.Loop() {
		if n := replay(b, s, "ses_7"); n != 2000 {
			b.Fatalf("replayed %d", n)
		}
	}
}

// replay reads the log (one session's part of it, when sessionID is set)
// from the start in pages of 512 and returns how many events it read.
func replay(b *testing.B, s store.Store, sessionID string) int {
	n := 0
	for after := int64(0); ; {
		evs, err := s.Events(context.Background(), store.EventQuery{After: after, SessionID: sessionID, Limit: 512})
		if err != nil {
			b.Fatal(err)
		}
		n += len(evs)
		if len(evs) < 512 {
			return n
		}
		after = evs[len(evs)-1].Seq
	}
}

// BenchmarkReplay100k reads a 100,000-event log from the start in pages,
// as a reconnecting SSE client would.
func BenchmarkReplay100k(b *testing.B) {
	s := openBench(b, "OFF")
	const total = 100_000
	fill100k(b, s)
	b.ReportAllocs()
	for b.Loop() {
		if n := replay(b, s, ""); n != total {
			b.Fatalf("replayed %d", n)
		}
	}
	b.ReportMetric(float64(total)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
