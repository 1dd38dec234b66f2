package apiv2

import (
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/vcs"
)

// The shapes of opencode 2's answers that several routes share.

// modelRef is opencode 2's ModelRef.
type modelRef struct {
	ID         string `json:"id"`
	ProviderID string `json:"providerID"`
	Variant    string `json:"variant,omitempty"`
}

func refOf(m core.ModelRef) modelRef {
	return modelRef{ID: m.ModelID, ProviderID: m.ProviderID, Variant: m.Variant}
}

// locationRef is opencode 2's LocationRef: where a session works.
type locationRef struct {
	Directory string `json:"directory"`
}

// locationInfo is opencode 2's LocationInfo: a directory and its project.
type locationInfo struct {
	Directory string          `json:"directory"`
	Project   locationProject `json:"project"`
}

type locationProject struct {
	ID        string `json:"id"`
	Directory string `json:"directory"`
}

// location describes dir: its project is the git repository holding it
// ("/" when none, opencode's "global" project).
func location(dir string) locationInfo {
	root := "/"
	if r, ok := vcs.Root(dir); ok {
		root = r
	}
	return locationInfo{Directory: dir, Project: locationProject{ID: "global", Directory: root}}
}

// sessionInfo is opencode 2's SessionV2.Info, with the later schema's
// outcome and time.idle: how the session's last run ended and when, set
// while the session is idle after a run.
type sessionInfo struct {
	ID        string        `json:"id"`
	ParentID  string        `json:"parentID,omitempty"`
	ProjectID string        `json:"projectID"`
	Agent     string        `json:"agent,omitempty"`
	Model     *modelRef     `json:"model,omitempty"`
	Cost      float64       `json:"cost"`
	Tokens    core.Tokens   `json:"tokens"`
	Time      sessionTime   `json:"time"`
	Title     string        `json:"title"`
	Location  locationRef   `json:"location"`
	Revert    *revertState  `json:"revert,omitempty"`
	Outcome   core.RunState `json:"outcome,omitempty"`
	// Paused (agentd's) says why the session's run waits for an explicit
	// resume after a restart (POST /session/{id}/resume); see package pause.
	Paused string `json:"paused,omitempty"`
}

type sessionTime struct {
	Created int64 `json:"created"`
	Updated int64 `json:"updated"`
	Idle    int64 `json:"idle,omitempty"`
}

// revertState is opencode 2's RevertState: the session's revert point.
type revertState struct {
	MessageID string `json:"messageID"`
	PartID    string `json:"partID,omitempty"`
	Snapshot  string `json:"snapshot,omitempty"`
	Diff      string `json:"diff,omitempty"`
}

func revertOf(r *core.SessionRevert) *revertState {
	if r == nil {
		return nil
	}
	return &revertState{MessageID: r.MessageID, PartID: r.PartID, Snapshot: r.Snapshot, Diff: r.Diff}
}

// infoOf is a session in opencode 2's shape; st is its status (for the
// outcome of its last run).
func infoOf(s core.Session, st core.SessionStatus) sessionInfo {
	out := sessionInfo{ID: s.ID, ParentID: s.ParentID, ProjectID: s.ProjectID, Agent: s.Agent, Cost: s.Cost, Tokens: s.Tokens,
		Time: sessionTime{Created: s.Time.Created, Updated: s.Time.Updated}, Title: s.Title,
		Location: locationRef{Directory: s.Directory}, Revert: revertOf(s.Revert)}
	if out.ProjectID == "" {
		out.ProjectID = "global"
	}
	if s.Model != nil {
		out.Model = &modelRef{ID: s.Model.ID, ProviderID: s.Model.ProviderID, Variant: s.Model.Variant}
	}
	if st.Type == core.StatusIdle && st.Last != nil {
		out.Outcome, out.Time.Idle = st.Last.Outcome, st.Last.Time
	}
	if st.Phase == core.PhasePaused {
		out.Paused = st.Message
	}
	return out
}

// structuredError is opencode 2's Session.StructuredError: a kind of
// failure, its message and the provider's HTTP status when there was one.
type structuredError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	Status  int    `json:"status,omitempty"`
}

// unknownError is opencode 1.18.33's SessionErrorUnknown, the only error
// shape its transcript and step events allow.
type unknownError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

func unknownOf(e *core.Error) *unknownError {
	if e == nil {
		return nil
	}
	return &unknownError{Type: "unknown", Message: e.Data.Message}
}
