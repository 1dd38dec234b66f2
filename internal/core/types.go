package core

import (
	"encoding/json"
	"strings"
	"time"
)

// Session is a durable conversation bound to a workspace directory, in
// opencode's Session shape.
type Session struct {
	ID        string         `json:"id"`
	Slug      string         `json:"slug"`
	ProjectID string         `json:"projectID"`
	Directory string         `json:"directory"`
	ParentID  string         `json:"parentID,omitempty"`
	Title     string         `json:"title"`
	Version   string         `json:"version"`
	Time      SessionTime    `json:"time"`
	Metadata  map[string]any `json:"metadata,omitempty"`
	// Agent and Model are the agent and model a client chose for the
	// session (opencode's TUI sets them at creation).
	Agent string        `json:"agent,omitempty"`
	Model *SessionModel `json:"model,omitempty"`
	// Cost and Tokens total the session's model calls.
	Cost   float64 `json:"cost"`
	Tokens Tokens  `json:"tokens"`
	// Permission holds the rules the client gave the session. They may
	// only narrow what the operator's rules allow.
	Permission []Rule `json:"permission,omitempty"`
	// Granted holds the allow rules of "always" answers to the session's
	// permission requests. They turn an operator's ask into allow, never
	// a deny. agentd's own; the store keeps them beside the JSON.
	Granted []Rule `json:"-"`
	// Summary counts what the session's runs changed in the workspace.
	Summary *SessionSummary `json:"summary,omitempty"`
	// Revert is the session's revert point (opencode's): the messages
	// from MessageID on are undone and hidden until a new prompt retires
	// them or an unrevert brings them back.
	Revert *SessionRevert `json:"revert,omitempty"`
	// Budget caps what the session's model calls may spend (agentd's
	// own; nil: no cap). Its Spent follows Cost and Tokens.
	Budget *Budget `json:"budget,omitempty"`
	// Owner is the id of the API key the session was made through (""
	// for the operator's sessions): a key that sees only its own sessions
	// sees it. Set at creation and never changed; the store keeps it
	// beside the JSON, so that no client can write it.
	Owner string `json:"-"`
}

// Budget is a cap on what model calls may spend: Tokens counts every
// token a provider reported (Tokens.Total), Cost is in US dollars; zero
// leaves that figure uncapped. A model call is made only while what was
// spent is below every cap set.
type Budget struct {
	Tokens int64   `json:"tokens,omitempty"`
	Cost   float64 `json:"cost,omitempty"`
	// Spent is what was spent when the budget was last written (a
	// session's: when it was set, and at the end of each of its runs).
	Spent *Spend `json:"spent,omitempty"`
}

// Spend is what model calls spent: tokens (Tokens.Total) and US dollars.
type Spend struct {
	Tokens int64   `json:"tokens"`
	Cost   float64 `json:"cost"`
}

// Note records in b what was spent (nothing when b is nil).
func (b *Budget) Note(tokens Tokens, cost float64) {
	if b != nil {
		b.Spent = &Spend{Tokens: tokens.Total(), Cost: cost}
	}
}

// SessionSummary is opencode's count of a session's changes.
type SessionSummary struct {
	Additions int `json:"additions"`
	Deletions int `json:"deletions"`
	Files     int `json:"files"`
}

// SessionRevert is opencode's revert point: the message (and, within it,
// the part) from which the session is undone, the snapshot of the
// workspace before the undo (which an unrevert restores), and the undo's
// diff. Kept is agentd's: the files the undo left as they were, and why
// (opencode's clients ignore it).
type SessionRevert struct {
	MessageID string       `json:"messageID"`
	PartID    string       `json:"partID,omitempty"`
	Snapshot  string       `json:"snapshot,omitempty"`
	Diff      string       `json:"diff,omitempty"`
	Kept      []RevertKept `json:"kept,omitempty"`
}

// RevertKept is a file a revert left as it was: the snapshots did not
// take it (ignored, over the size limit), so they cannot tell that a step
// made it, nor could the change be undone.
type RevertKept struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// SessionModel is the model of a session, in opencode's shape.
type SessionModel struct {
	ID         string `json:"id"`
	ProviderID string `json:"providerID"`
	Variant    string `json:"variant,omitempty"`
}

// SessionTime holds a session's timestamps in epoch milliseconds.
type SessionTime struct {
	Created int64 `json:"created"`
	Updated int64 `json:"updated"`
}

// Tokens counts a model call's token usage in opencode's shape.
type Tokens struct {
	Input     int64       `json:"input"`
	Output    int64       `json:"output"`
	Reasoning int64       `json:"reasoning"`
	Cache     CacheTokens `json:"cache"`
}

// Add returns the sum of t and o.
func (t Tokens) Add(o Tokens) Tokens {
	return Tokens{
		Input:     t.Input + o.Input,
		Output:    t.Output + o.Output,
		Reasoning: t.Reasoning + o.Reasoning,
		Cache:     CacheTokens{Read: t.Cache.Read + o.Cache.Read, Write: t.Cache.Write + o.Cache.Write},
	}
}

// Total is every token counted: input, output, reasoning, and the cache's
// reads and writes (the figure a token budget caps).
func (t Tokens) Total() int64 {
	return t.Input + t.Output + t.Reasoning + t.Cache.Read + t.Cache.Write
}

// CacheTokens counts prompt-cache reads and writes.
type CacheTokens struct {
	Read  int64 `json:"read"`
	Write int64 `json:"write"`
}

// ModelRef names a model by provider and model id, as in a user message,
// with the variant (a named set of options) when one was chosen.
type ModelRef struct {
	ProviderID string `json:"providerID"`
	ModelID    string `json:"modelID"`
	Variant    string `json:"variant,omitempty"`
}

// Roles of a message.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Message is the info of a user or an assistant turn. The JSON form depends
// on Role: user messages carry agent and model, assistant messages carry
// the model ids, cost, tokens and the outcome fields.
type Message struct {
	ID        string
	SessionID string
	Role      string
	Created   int64
	Completed int64 // assistant only; 0 while streaming

	// User fields.
	Agent  string
	Model  ModelRef
	System string
	// Format asks for the answer as JSON of a schema (opencode's
	// structured output).
	Format *OutputFormat

	// Assistant fields.
	ParentID   string
	ProviderID string
	ModelID    string
	Mode       string
	CWD        string
	Root       string
	Cost       float64
	Tokens     Tokens
	Finish     string
	Error      *Error
	// Summary marks the assistant message holding a compaction's summary.
	Summary bool
	// Structured is the answer a structured-output run captured.
	Structured json.RawMessage

	// RunID ties the message to the run that created or answered it. It is
	// agentd's own and not part of the JSON (opencode's schema has no place
	// for it); the store keeps it in a column of its own.
	RunID string
	// Seq is the message's place in its session, in the server's order of
	// arrival (set by the store; never from a client's id).
	Seq int64
}

type userMessageJSON struct {
	ID        string `json:"id"`
	SessionID string `json:"sessionID"`
	Role      string `json:"role"`
	Time      struct {
		Created int64 `json:"created"`
	} `json:"time"`
	Agent  string        `json:"agent"`
	Model  ModelRef      `json:"model"`
	System string        `json:"system,omitempty"`
	Format *OutputFormat `json:"format,omitempty"`
}

// OutputFormat is opencode's requested form of an answer: text, or JSON
// matching Schema (json_schema), with RetryCount corrections allowed.
type OutputFormat struct {
	Type       string          `json:"type"`
	Schema     json.RawMessage `json:"schema,omitempty"`
	RetryCount *int            `json:"retryCount,omitempty"`
}

// FormatJSONSchema is the output format of structured output.
const FormatJSONSchema = "json_schema"

type assistantTime struct {
	Created   int64 `json:"created"`
	Completed int64 `json:"completed,omitempty"`
}

type assistantPath struct {
	CWD  string `json:"cwd"`
	Root string `json:"root"`
}

type assistantMessageJSON struct {
	ID         string          `json:"id"`
	SessionID  string          `json:"sessionID"`
	Role       string          `json:"role"`
	Time       assistantTime   `json:"time"`
	Error      *Error          `json:"error,omitempty"`
	ParentID   string          `json:"parentID"`
	ModelID    string          `json:"modelID"`
	ProviderID string          `json:"providerID"`
	Mode       string          `json:"mode"`
	Agent      string          `json:"agent"`
	Path       assistantPath   `json:"path"`
	Summary    bool            `json:"summary,omitempty"`
	Cost       float64         `json:"cost"`
	Tokens     Tokens          `json:"tokens"`
	Structured json.RawMessage `json:"structured,omitempty"`
	Finish     string          `json:"finish,omitempty"`
}

// JSONVariants names the shapes of a message, by role (for the API
// document).
func (Message) JSONVariants() (string, map[string]any) {
	return "role", map[string]any{RoleUser: userMessageJSON{}, RoleAssistant: assistantMessageJSON{}}
}

// MarshalJSON encodes m in opencode's UserMessage or AssistantMessage shape.
func (m Message) MarshalJSON() ([]byte, error) {
	if m.Role == RoleUser {
		var u userMessageJSON
		u.ID, u.SessionID, u.Role = m.ID, m.SessionID, m.Role
		u.Time.Created = m.Created
		u.Agent, u.Model, u.System, u.Format = m.Agent, m.Model, m.System, m.Format
		return json.Marshal(u)
	}
	a := assistantMessageJSON{
		ID: m.ID, SessionID: m.SessionID, Role: m.Role,
		Time:     assistantTime{Created: m.Created, Completed: m.Completed},
		Error:    m.Error,
		ParentID: m.ParentID, ModelID: m.ModelID, ProviderID: m.ProviderID,
		Mode: m.Mode, Agent: m.Agent, Path: assistantPath{CWD: m.CWD, Root: m.Root},
		Cost: m.Cost, Tokens: m.Tokens, Finish: m.Finish, Summary: m.Summary, Structured: m.Structured,
	}
	return json.Marshal(a)
}

// UnmarshalJSON decodes either message shape.
func (m *Message) UnmarshalJSON(b []byte) error {
	var probe struct {
		Role string `json:"role"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return err
	}
	if probe.Role == RoleUser {
		var u userMessageJSON
		if err := json.Unmarshal(b, &u); err != nil {
			return err
		}
		*m = Message{ID: u.ID, SessionID: u.SessionID, Role: u.Role, Created: u.Time.Created,
			Agent: u.Agent, Model: u.Model, System: u.System, Format: u.Format}
		return nil
	}
	var a assistantMessageJSON
	if err := json.Unmarshal(b, &a); err != nil {
		return err
	}
	*m = Message{ID: a.ID, SessionID: a.SessionID, Role: a.Role, Created: a.Time.Created,
		Completed: a.Time.Completed, Error: a.Error, ParentID: a.ParentID, ModelID: a.ModelID,
		ProviderID: a.ProviderID, Mode: a.Mode, Agent: a.Agent, CWD: a.Path.CWD, Root: a.Path.Root,
		Cost: a.Cost, Tokens: a.Tokens, Finish: a.Finish, Summary: a.Summary, Structured: a.Structured}
	return nil
}

// MessageWithParts is a message with its parts, the shape of the message
// endpoints.
type MessageWithParts struct {
	Info  Message `json:"info"`
	Parts []Part  `json:"parts"`
}

// defaultTitlePrefix starts the title a session gets at creation, until
// one is set or generated.
const defaultTitlePrefix = "New session - "

// DefaultTitle is the title of a session created at t without one.
func DefaultTitle(t time.Time) string { return defaultTitlePrefix + t.UTC().Format(time.RFC3339) }

// IsDefaultTitle reports whether a title is still the one given at
// creation.
func IsDefaultTitle(title string) bool { return strings.HasPrefix(title, defaultTitlePrefix) }
