package engine

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// recordingTx records the rows and events a writer hands its transaction.
type recordingTx struct {
	store.Tx
	calls []string
}

func (r *recordingTx) PutPart(_ context.Context, p core.Part) error {
	r.calls = append(r.calls, "part "+p.ID+" "+p.Text)
	return nil
}

func (r *recordingTx) PutMessage(_ context.Context, m core.Message) error {
	r.calls = append(r.calls, "message "+m.ID+" "+m.Finish)
	return nil
}

func (r *recordingTx) InsertMessage(_ context.Context, m core.Message) error {
	r.calls = append(r.calls, "insert "+m.ID)
	return nil
}

func (r *recordingTx) AppendEvent(_ context.Context, ev core.Event) error {
	r.calls = append(r.calls, "event "+ev.Type)
	return nil
}

// Pending writes store each part and message once, with its last version,
// at the place of its first; every version keeps its event, in order; a
// message inserted among them comes after the rows written before it.
func TestPendingWritesStoreEachRowOnce(t *testing.T) {
	t.Parallel()
	tx := &recordingTx{}
	w := writer{ctx: t.Context(), tx: tx, rows: &rowBuffer{}}
	w.message(core.Message{ID: "msg_1", SessionID: "ses"})
	w.part(core.Part{ID: "prt_1", SessionID: "ses", Text: "a"})
	w.part(core.Part{ID: "prt_2", SessionID: "ses", Text: "b"})
	w.part(core.Part{ID: "prt_1", SessionID: "ses", Text: "a2"})
	w.message(core.Message{ID: "msg_1", SessionID: "ses", Finish: "stop"})
	w.insertMessage(core.Message{ID: "msg_2", SessionID: "ses"})
	w.part(core.Part{ID: "prt_3", SessionID: "ses", Text: "c"})
	w.part(core.Part{ID: "prt_3", SessionID: "ses", Text: "c2"})
	w.flushRows()
	if w.err != nil {
		t.Fatal(w.err)
	}
	want := []string{
		"event message.updated", "event message.part.updated", "event message.part.updated",
		"event message.part.updated", "event message.updated",
		"message msg_1 stop", "part prt_1 a2", "part prt_2 b",
		"insert msg_2", "event message.updated",
		"event message.part.updated", "event message.part.updated",
		"part prt_3 c2",
	}
	if diff := cmp.Diff(want, tx.calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}
