package core

import "fmt"

// RunEvent is what moves a run from one state to the next.
type RunEvent string

// Run events.
const (
	// OnStart: a node starts executing a queued run.
	OnStart RunEvent = "start"
	// OnRetryWait: a model call failed in a way worth retrying; the run
	// waits before the next attempt.
	OnRetryWait RunEvent = "retry_wait"
	// OnRetry: the wait is over; the run calls the model again.
	OnRetry RunEvent = "retry"
	// OnResume: a run cut off by a crash (or taken over from a dead node)
	// goes on (busy, recovering).
	OnResume RunEvent = "resume"
	// OnSucceed, OnFail and OnInterrupt end a run.
	OnSucceed   RunEvent = "succeed"
	OnFail      RunEvent = "fail"
	OnInterrupt RunEvent = "interrupt"
)

// Transition is one move of the run state machine.
type Transition struct {
	From  RunState
	On    RunEvent
	To    RunState
	About string
}

// RunTransitions are every move a run may make; Next reads them, and so
// do the tests. A terminal state has none: a run ends exactly once.
var RunTransitions = []Transition{
	{RunQueued, OnStart, RunRunning, "its turn came: a node executes it"},
	{RunQueued, OnInterrupt, RunInterrupted, "aborted, superseded or cut off before it started"},
	{RunRunning, OnRetryWait, RunRetrying, "a retryable model failure: it waits for the next attempt"},
	{RunRetrying, OnRetry, RunRunning, "the next attempt"},
	{RunRunning, OnResume, RunRunning, "resumed after a crash (busy, recovering)"},
	{RunRetrying, OnResume, RunRunning, "resumed after a crash while it waited to retry"},
	{RunQueued, OnResume, RunRunning, "taken over from a node that stopped before it began it"},
	{RunRunning, OnSucceed, RunSucceeded, "the model answered"},
	{RunRetrying, OnSucceed, RunSucceeded, "a steered prompt found the retry already answered"},
	{RunRunning, OnFail, RunFailed, "a provider error, retries exhausted, the step budget, a token or cost budget, a crash loop, an internal error"},
	{RunRetrying, OnFail, RunFailed, "retries exhausted"},
	{RunQueued, OnFail, RunFailed, "a crash loop found at start"},
	{RunRunning, OnInterrupt, RunInterrupted, "aborted, superseded, or cut off with resumption off"},
	{RunRetrying, OnInterrupt, RunInterrupted, "aborted while it waited to retry"},
}

// Next returns the state a run in state s moves to on ev, or an error for
// a move the state machine does not have.
func (s RunState) Next(ev RunEvent) (RunState, error) {
	for _, t := range RunTransitions {
		if t.From == s && t.On == ev {
			return t.To, nil
		}
	}
	return s, fmt.Errorf("run state %s has no transition on %s", s, ev)
}

// Apply moves r on ev, or returns the error of a move the state machine
// does not have (and leaves r as it is).
func (r *Run) Apply(ev RunEvent) error {
	next, err := r.State.Next(ev)
	if err != nil {
		return fmt.Errorf("run %s: %w", r.ID, err)
	}
	r.State = next
	return nil
}

// EndEvent is the event that ends a run in state end.
func EndEvent(end RunState) RunEvent {
	switch end {
	case RunSucceeded:
		return OnSucceed
	case RunFailed:
		return OnFail
	}
	return OnInterrupt
}

// BusyPolicy says what becomes of a prompt sent while a run is active.
type BusyPolicy string

// Busy policies.
const (
	// PolicySteer (the default) joins the running run at its next step.
	PolicySteer BusyPolicy = "steer"
	// PolicyQueue queues a run after the active one.
	PolicyQueue BusyPolicy = "queue"
	// PolicyReject refuses the prompt (409).
	PolicyReject BusyPolicy = "reject"
	// PolicyInterrupt queues a run and ends the active ones (superseded).
	PolicyInterrupt BusyPolicy = "interrupt"
)

// Valid reports whether p names a busy policy ("" is the default).
func (p BusyPolicy) Valid() bool {
	switch p {
	case "", PolicySteer, PolicyQueue, PolicyReject, PolicyInterrupt:
		return true
	}
	return false
}
