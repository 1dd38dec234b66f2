package core

import "testing"

// TestRunTransitions reads the state machine: a run ends exactly once
// (no move out of a terminal state, every non-terminal state can end every
// way), every state is reachable from queued, and each move is unique.
func TestRunTransitions(t *testing.T) {
	states := []RunState{RunQueued, RunRunning, RunRetrying, RunSucceeded, RunFailed, RunInterrupted}
	seen := map[[2]string]bool{}
	for _, tr := range RunTransitions {
		key := [2]string{string(tr.From), string(tr.On)}
		if seen[key] {
			t.Errorf("two moves from %s on %s", tr.From, tr.On)
		}
		seen[key] = true
		if tr.From.Terminal() {
			t.Errorf("a move out of terminal state %s (on %s)", tr.From, tr.On)
		}
		if tr.About == "" {
			t.Errorf("%s on %s: no description", tr.From, tr.On)
		}
	}
	for _, s := range states {
		if s.Terminal() {
			for _, ev := range []RunEvent{OnStart, OnRetry, OnResume, OnSucceed, OnFail, OnInterrupt} {
				if _, err := s.Next(ev); err == nil {
					t.Errorf("%s moves on %s: a run ends exactly once", s, ev)
				}
			}
			continue
		}
		if _, err := s.Next(OnInterrupt); err != nil {
			t.Errorf("%s cannot be interrupted (aborted): %v", s, err)
		}
		if _, err := s.Next(OnFail); err != nil {
			t.Errorf("%s cannot fail: %v", s, err)
		}
	}
	// Reachability from queued.
	reach := map[RunState]bool{RunQueued: true}
	for changed := true; changed; {
		changed = false
		for _, tr := range RunTransitions {
			if reach[tr.From] && !reach[tr.To] {
				reach[tr.To], changed = true, true
			}
		}
	}
	for _, s := range states {
		if !reach[s] {
			t.Errorf("%s cannot be reached from queued", s)
		}
	}
	for _, end := range []RunState{RunSucceeded, RunFailed, RunInterrupted} {
		if got, err := RunRunning.Next(EndEvent(end)); err != nil || got != end {
			t.Errorf("running on %s = %s, %v; want %s", EndEvent(end), got, err, end)
		}
	}
	r := Run{ID: "run_x", State: RunSucceeded}
	if err := r.Apply(OnRetry); err == nil || r.State != RunSucceeded {
		t.Errorf("an ended run moved: %v %s", err, r.State)
	}
}
