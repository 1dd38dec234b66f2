package engine

import (
	"context"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// A runner's pending writes (later) are snapshots, so they can be made
// ready before their transaction: the runner runs them against a
// recording writer, which encodes every row and event, and the
// transaction only stores the result. Encoding was a seventh of the
// committer's time, which every writer waits for; made by each runner on
// its own goroutine, it no longer waits for, nor holds up, anyone.
//
// The recording also stores each part and message once. Pending writes
// follow a step as it goes on, and one transaction often carries several
// versions of the same row (a step's message when it opened and when it
// ended; a tool call pending, then running): the row is stored once, with
// its last version, at the place of its first, while every version keeps
// its event, in order. That place keeps the server's order of arrival and
// a message ahead of its parts, a message inserted among them (a
// compaction's request) included: every write keeps its place in the one
// list.
type recording struct {
	ops    []recorded
	index  map[string]int // part and message ids → their op
	events []core.Event
}

// recorded is one write of a recording: a part, message or run with its
// encoding, a message to insert, or another write.
type recorded struct {
	part     *core.Part
	message  *core.Message
	run      *core.Run
	inserted *core.Message
	data     []byte
	write    func(context.Context, store.Tx) error
}

// record runs the pending writes against a recording writer.
func record(ctx context.Context, writes []func(*writer)) (*recording, error) {
	rec := &recording{}
	w := writer{ctx: ctx, rec: rec}
	for _, write := range writes {
		write(&w)
	}
	return rec, w.err
}

// put records a part or message, replacing an earlier version in place.
func (r *recording) put(id string, op recorded) {
	if i, ok := r.index[id]; ok {
		r.ops[i] = op
		return
	}
	if r.index == nil {
		r.index = map[string]int{}
	}
	r.index[id] = len(r.ops)
	r.ops = append(r.ops, op)
}

// insert records a message insert.
func (r *recording) insert(op recorded) { r.ops = append(r.ops, op) }

// apply stores the recording in tx.
func (r *recording) apply(ctx context.Context, tx store.Tx) error {
	for _, op := range r.ops {
		var err error
		switch {
		case op.part != nil:
			err = tx.PutPartJSON(ctx, *op.part, op.data)
		case op.message != nil:
			err = tx.PutMessageJSON(ctx, *op.message, op.data)
		case op.run != nil:
			err = tx.UpdateRunJSON(ctx, *op.run, op.data)
		case op.inserted != nil:
			err = tx.InsertMessage(ctx, *op.inserted)
		default:
			err = op.write(ctx, tx)
		}
		if err != nil {
			return err
		}
	}
	for _, ev := range r.events {
		if err := tx.AppendEvent(ctx, ev); err != nil {
			return err
		}
	}
	return nil
}
