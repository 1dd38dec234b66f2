package bench

import (
	"encoding/json"
	"testing"

	"github.com/agentd/agentd/internal/core"
)

// turnEnds hands a waiting session the end of its turn: session.idle ends
// it, a session.error before the idle makes it a failure, and another
// session's events or an unexpected idle change nothing.
func TestTurnEnds(t *testing.T) {
	t.Parallel()
	ev := func(typ, sid string) sseEvent {
		return sseEvent{Type: typ, Properties: json.RawMessage(`{"sessionID":"` + sid + `"}`)}
	}
	ends := &turnEnds{waiting: map[string]chan error{}}
	ok, bad := ends.expect("ses_ok"), ends.expect("ses_bad")
	ends.observe(ev(core.EventSessionIdle, "ses_other"))
	ends.observe(ev(core.EventSessionError, "ses_bad"))
	ends.observe(ev(core.EventSessionStatus, "ses_ok"))
	select {
	case err := <-ok:
		t.Fatalf("turn ended before its idle: %v", err)
	default:
	}
	ends.observe(ev(core.EventSessionIdle, "ses_ok"))
	ends.observe(ev(core.EventSessionIdle, "ses_bad"))
	if err := <-ok; err != nil {
		t.Errorf("a turn that went idle: %v", err)
	}
	if err := <-bad; err == nil {
		t.Error("a turn with a session.error ended without an error")
	}
	// Forgotten, the session starts its next turn clean.
	ends.forget("ses_bad")
	again := ends.expect("ses_bad")
	ends.observe(ev(core.EventSessionIdle, "ses_bad"))
	if err := <-again; err != nil {
		t.Errorf("the next turn inherited the failure: %v", err)
	}
}
