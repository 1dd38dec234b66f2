package core

// RunState is where a run is in its lifecycle (see RunTransitions). A run
// is terminal once it is succeeded, failed or interrupted.
type RunState string

// Run states.
const (
	RunQueued      RunState = "queued"
	RunRunning     RunState = "running"
	RunRetrying    RunState = "retrying"
	RunSucceeded   RunState = "succeeded"
	RunFailed      RunState = "failed"
	RunInterrupted RunState = "interrupted"
)

// EndReason says why a run ended as it did ("" for a success).
type EndReason string

// Reasons recorded with a run's outcome.
const (
	ReasonAborted          EndReason = "aborted"
	ReasonServerRestart    EndReason = "server_restart"
	ReasonSuperseded       EndReason = "superseded"
	ReasonProviderError    EndReason = "provider_error"
	ReasonRetriesExhausted EndReason = "retries_exhausted"
	ReasonMaxSteps         EndReason = "max_steps"
	ReasonCrashLoop        EndReason = "crash_loop"
	ReasonInternal         EndReason = "internal"
	// ReasonStructuredOutput: the model never gave the structured answer
	// the prompt asked for.
	ReasonStructuredOutput EndReason = "structured_output"
	// ReasonRejected: the user rejected a permission request without a
	// message (interrupted): the turn stops there, as opencode's does.
	ReasonRejected EndReason = "rejected"
	// ReasonBudgetExceeded: the session's or its API key's token or cost
	// budget was spent before a model call (failed; the error carries
	// the figures).
	ReasonBudgetExceeded EndReason = "budget_exceeded"
)

// Phase refines a busy status: what the run waits for or does.
type Phase string

// Phases.
const (
	PhaseRecovering        Phase = "recovering"
	PhaseWaitingPermission Phase = "waiting_permission"
	PhaseCompacting        Phase = "compacting"
)

// TerminalState reports whether a run in state s has ended.
func TerminalState(s RunState) bool { return s.Terminal() }

// Terminal reports whether a run in state s has ended.
func (s RunState) Terminal() bool {
	return s == RunSucceeded || s == RunFailed || s == RunInterrupted
}

// Run is one execution of the agent loop for a session.
type Run struct {
	ID            string    `json:"id"`
	SessionID     string    `json:"sessionID"`
	State         RunState  `json:"state"`
	Reason        EndReason `json:"reason,omitempty"`
	Error         *Error    `json:"error,omitempty"`
	UserMessageID string    `json:"messageID"`
	Model         ModelRef  `json:"model"`
	// Agent is the agent that answers the run's prompts.
	Agent   string `json:"agent,omitempty"`
	Phase   Phase  `json:"phase,omitempty"`
	Steps   int    `json:"steps"`
	Resumes int    `json:"resumes"`
	// Attempt, RetryMessage and NextRetry describe a pending retry.
	Attempt      int     `json:"attempt,omitempty"`
	RetryMessage string  `json:"retryMessage,omitempty"`
	NextRetry    int64   `json:"next,omitempty"`
	Time         RunTime `json:"time"`
	// Snapshot and SnapshotEnd are the workspace's snapshots when the run
	// took its first and its latest: what the run changed is their
	// difference.
	Snapshot    string `json:"snapshot,omitempty"`
	SnapshotEnd string `json:"snapshotEnd,omitempty"`
	// Shell is the command of a run that runs the user's own shell
	// command (opencode's shell mode) instead of the model.
	Shell string `json:"shell,omitempty"`
}

// RunTime holds a run's timestamps in epoch milliseconds.
type RunTime struct {
	Created int64 `json:"created"`
	Started int64 `json:"started,omitempty"`
	Ended   int64 `json:"ended,omitempty"`
}

// Status types.
const (
	StatusIdle  = "idle"
	StatusBusy  = "busy"
	StatusRetry = "retry"
)

// LastRun summarises how a session's most recent run ended.
type LastRun struct {
	RunID   string    `json:"runID"`
	Outcome RunState  `json:"outcome"`
	Reason  EndReason `json:"reason,omitempty"`
	Error   *Error    `json:"error,omitempty"`
	Time    int64     `json:"time"`
}

// SessionStatus is opencode's status union with agentd's extension fields,
// which older clients ignore.
type SessionStatus struct {
	Type    string   `json:"type"`
	RunID   string   `json:"runID,omitempty"`
	Since   int64    `json:"since,omitempty"`
	Phase   Phase    `json:"phase,omitempty"`
	Attempt int      `json:"attempt,omitempty"`
	Message string   `json:"message,omitempty"`
	Next    int64    `json:"next,omitempty"`
	Last    *LastRun `json:"last,omitempty"`
}

// StatusRule is the version of StatusOf. A store that keeps statuses
// stores it beside them, and derives again a status stored under another
// version: raise it whenever the rule below changes what it computes.
const StatusRule = 1

// StatusOf derives a session status from its oldest non-terminal run (nil
// when there is none) and its most recently ended run (nil when it never
// ran). This is the only place status is computed.
func StatusOf(active, last *Run) SessionStatus {
	if active == nil {
		st := SessionStatus{Type: StatusIdle}
		if last != nil {
			st.Last = &LastRun{RunID: last.ID, Outcome: last.State, Reason: last.Reason, Error: last.Error, Time: last.Time.Ended}
		}
		return st
	}
	if active.State == RunRetrying {
		return SessionStatus{Type: StatusRetry, RunID: active.ID, Attempt: active.Attempt, Message: active.RetryMessage, Next: active.NextRetry}
	}
	since := active.Time.Created
	return SessionStatus{Type: StatusBusy, RunID: active.ID, Since: since, Phase: active.Phase}
}

// OpencodeStatus is opencode's SessionStatus exactly: idle and busy carry
// only their type, retry its attempt, message and next try. opencode's
// routes and the session.status event use it; agentd's own routes use the
// richer SessionStatus.
type OpencodeStatus struct {
	Type    string  `json:"type"`
	Attempt *int    `json:"attempt,omitempty"`
	Message *string `json:"message,omitempty"`
	Next    *int64  `json:"next,omitempty"`
}

// Opencode narrows s to opencode's shape.
func (s SessionStatus) Opencode() OpencodeStatus {
	if s.Type != StatusRetry {
		return OpencodeStatus{Type: s.Type}
	}
	attempt, msg, next := s.Attempt, s.Message, s.Next
	return OpencodeStatus{Type: s.Type, Attempt: &attempt, Message: &msg, Next: &next}
}
