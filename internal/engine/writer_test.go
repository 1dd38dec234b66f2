package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// recordingTx records the rows and events a writer hands its transaction.
type recordingTx struct {
	store.Tx
	calls  []string
	events []core.Event
}

func (r *recordingTx) PutPartJSON(_ context.Context, p core.Part, data []byte) error {
	var back core.Part
	if err := json.Unmarshal(data, &back); err != nil || back.Text != p.Text {
		r.calls = append(r.calls, "bad encoding of "+p.ID)
	}
	r.calls = append(r.calls, "part "+p.ID+" "+p.Text)
	return nil
}

func (r *recordingTx) PutMessageJSON(_ context.Context, m core.Message, _ []byte) error {
	r.calls = append(r.calls, "message "+m.ID+" "+m.Finish)
	return nil
}

func (r *recordingTx) UpdateRunJSON(_ context.Context, run core.Run, _ []byte) error {
	r.calls = append(r.calls, "run "+run.ID)
	return nil
}

func (r *recordingTx) InsertMessage(_ context.Context, m core.Message) error {
	r.calls = append(r.calls, "insert "+m.ID)
	return nil
}

func (r *recordingTx) AppendEvent(_ context.Context, ev core.Event) error {
	r.calls = append(r.calls, "event "+ev.Type)
	r.events = append(r.events, ev)
	return nil
}

// Pending writes store each part and message once, with its last version,
// at the place of its first; every version keeps its event, in order; a
// message inserted among them keeps its place.
func TestRecordedWritesStoreEachRowOnce(t *testing.T) {
	t.Parallel()
	rec, err := record(t.Context(), []func(*writer){
		func(w *writer) {
			w.message(core.Message{ID: "msg_1", SessionID: "ses"})
			w.part(core.Part{ID: "prt_1", SessionID: "ses", Type: core.PartText, Text: "a"})
			w.part(core.Part{ID: "prt_2", SessionID: "ses", Type: core.PartText, Text: "b"})
		},
		func(w *writer) {
			w.part(core.Part{ID: "prt_1", SessionID: "ses", Type: core.PartText, Text: "a2"})
			w.message(core.Message{ID: "msg_1", SessionID: "ses", Finish: "stop"})
			w.run(core.Run{ID: "run_1", SessionID: "ses"})
			w.insertMessage(core.Message{ID: "msg_2", SessionID: "ses"})
			w.part(core.Part{ID: "prt_3", SessionID: "ses", Type: core.PartText, Text: "c"})
			w.part(core.Part{ID: "prt_1", SessionID: "ses", Type: core.PartText, Text: "a3"})
			w.part(core.Part{ID: "prt_3", SessionID: "ses", Type: core.PartText, Text: "c2"})
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	tx := &recordingTx{}
	if err := rec.apply(t.Context(), tx); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"message msg_1 stop", "part prt_1 a3", "part prt_2 b", "run run_1",
		"insert msg_2", "part prt_3 c2",
		"event message.updated", "event message.part.updated", "event message.part.updated",
		"event message.part.updated", "event message.updated", "event run.updated",
		"event message.updated", "event message.part.updated", "event message.part.updated",
		"event message.part.updated",
	}
	if diff := cmp.Diff(want, tx.calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

// The events built around a row's encoding are, byte for byte, what
// encoding their properties gives, text that JSON escapes included.
func TestEventsAroundRowEncodings(t *testing.T) {
	t.Parallel()
	tx := &recordingTx{}
	w := writer{ctx: t.Context(), tx: tx}
	sid := `ses_<&>"é`
	p := core.Part{ID: "prt_1", SessionID: sid, MessageID: "msg_1", Type: core.PartText, Text: "<b>\"tag\" & \u2028 ü</b>\n"}
	m := core.Message{ID: "msg_1", SessionID: sid, Role: core.RoleAssistant, Finish: "<stop>"}
	r := core.Run{ID: "run_1", SessionID: sid, State: core.RunRunning}
	w.part(p)
	w.message(m)
	w.run(r)
	if w.err != nil || len(tx.events) != 3 {
		t.Fatalf("err %v, %d events", w.err, len(tx.events))
	}
	var got core.PartProps
	if err := json.Unmarshal(tx.events[0].Properties, &got); err != nil {
		t.Fatal(err)
	}
	for i, props := range []any{
		core.PartProps{SessionID: sid, Part: p, Time: got.Time},
		core.MessageProps{SessionID: sid, Info: m},
		core.RunProps{Run: r},
	} {
		want, err := json.Marshal(props)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(tx.events[i].Properties, want) {
			t.Errorf("event %d:\n got %s\nwant %s", i, tx.events[i].Properties, want)
		}
		if tx.events[i].SessionID != sid {
			t.Errorf("event %d: session %q", i, tx.events[i].SessionID)
		}
	}
}
