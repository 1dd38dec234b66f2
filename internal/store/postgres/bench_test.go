package postgres_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/postgres"
	"github.com/agentd/agentd/internal/store/postgres/pgtest"
	"github.com/agentd/agentd/internal/store/storetest"
)

// The parallel benchmarks use this many goroutines per core, so that the
// figures show where commits queue on the server rather than on the two
// cores of the client.
const benchParallelism = 8

// BenchmarkCommitCeiling is PostgreSQL's own limit on this machine: one
// single-row INSERT committed per operation (fsync on), with nothing of
// agentd's around it. agentd's figures are read against this one.
func BenchmarkCommitCeiling(b *testing.B) {
	url := pgtest.Schema(b)
	db, err := sql.Open("pgx", url)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(64)
	if _, err := db.Exec(`CREATE TABLE ceiling (id bigserial PRIMARY KEY, v text NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	b.Run("serial", func(b *testing.B) {
		for b.Loop() {
			if _, err := db.Exec(`INSERT INTO ceiling (v) VALUES ('x')`); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.SetParallelism(benchParallelism)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := db.Exec(`INSERT INTO ceiling (v) VALUES ('x')`); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkAppendEvent is the engine's most common write on PostgreSQL: one
// transaction that writes a part and its event (the session row lock, the
// event head lock for a dense seq, the commit), as BenchmarkAppendEvent
// measures it on SQLite. In parallel, every goroutine writes to a session
// of its own, as concurrent runs do.
func BenchmarkAppendEvent(b *testing.B) {
	url := pgtest.Schema(b)
	s, err := postgres.Open(context.Background(), url, postgres.Options{Node: "bench", MaxConns: 32})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	write := newPartWriter(b, s)
	b.Run("serial", func(b *testing.B) {
		w := write()
		b.ReportAllocs()
		for b.Loop() {
			if err := w(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.SetParallelism(benchParallelism)
		b.RunParallel(func(pb *testing.PB) {
			w := write()
			for pb.Next() {
				if err := w(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// newPartWriter returns a maker of writers, each on a session of its own.
func newPartWriter(b *testing.B, s *postgres.Store) func() func() error {
	ctx := context.Background()
	return func() func() error {
		sess := storetest.NewSession("/b", time.Now().UnixMilli())
		msg := core.Message{ID: core.NewID(core.PrefixMessage, false), SessionID: sess.ID, Role: core.RoleAssistant}
		err := s.Tx(ctx, func(tx store.Tx) error {
			if err := tx.InsertSession(ctx, sess); err != nil {
				return err
			}
			return tx.InsertMessage(ctx, msg)
		})
		if err != nil {
			b.Fatal(err)
		}
		part := core.Part{ID: core.NewID(core.PrefixPart, false), SessionID: sess.ID, MessageID: msg.ID, Type: core.PartText, Text: "hello"}
		return func() error {
			return s.Tx(ctx, func(tx store.Tx) error {
				if err := tx.PutPart(ctx, part); err != nil {
					return err
				}
				return tx.AppendEvent(ctx, core.MustEvent(sess.ID, core.EventPartUpdated, map[string]any{"part": part}))
			})
		}
	}
}
