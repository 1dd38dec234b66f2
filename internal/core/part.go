package core

import "encoding/json"

// PartType is what a part holds.
type PartType string

// Part types. PartIdle is agentd's own: it closes a run in the transcript.
const (
	PartText       PartType = "text"
	PartReasoning  PartType = "reasoning"
	PartTool       PartType = "tool"
	PartStepStart  PartType = "step-start"
	PartStepFinish PartType = "step-finish"
	PartFile       PartType = "file"
	PartCompaction PartType = "compaction"
	PartPatch      PartType = "patch"
	PartIdle       PartType = "idle"
)

// Tool part states.
const (
	ToolPending   = "pending"
	ToolRunning   = "running"
	ToolCompleted = "completed"
	ToolError     = "error"
)

// PartTime is the start and end of a streamed or executed part, in epoch ms.
// Compacted, on a completed tool call only, is when its output stopped
// being sent to the model.
type PartTime struct {
	Start     int64 `json:"start"`
	End       int64 `json:"end,omitempty"`
	Compacted int64 `json:"compacted,omitempty"`
}

// ToolState is the lifecycle of one tool call, in opencode's shape.
type ToolState struct {
	Status   string          `json:"status"`
	Input    json.RawMessage `json:"input"`
	Raw      string          `json:"raw,omitempty"`
	Output   string          `json:"output,omitempty"`
	Title    string          `json:"title,omitempty"`
	Error    string          `json:"error,omitempty"`
	Metadata map[string]any  `json:"metadata,omitempty"`
	Time     PartTime        `json:"time"`
}

// The shapes of a tool state, by status.
type (
	toolPendingJSON struct {
		Status string          `json:"status"`
		Input  json.RawMessage `json:"input"`
		Raw    string          `json:"raw"`
	}
	toolRunningJSON struct {
		Status   string          `json:"status"`
		Input    json.RawMessage `json:"input"`
		Title    string          `json:"title,omitempty"`
		Metadata map[string]any  `json:"metadata,omitempty"`
		Time     startTime       `json:"time"`
	}
	toolCompletedJSON struct {
		Status   string          `json:"status"`
		Input    json.RawMessage `json:"input"`
		Output   string          `json:"output"`
		Title    string          `json:"title"`
		Metadata map[string]any  `json:"metadata"`
		Time     PartTime        `json:"time"`
	}
	toolErrorJSON struct {
		Status   string          `json:"status"`
		Input    json.RawMessage `json:"input"`
		Error    string          `json:"error"`
		Metadata map[string]any  `json:"metadata,omitempty"`
		Time     PartTime        `json:"time"`
	}
	startTime struct {
		Start int64 `json:"start"`
	}
)

// JSONVariants names the shapes of a tool state, by status (for the API
// document).
func (ToolState) JSONVariants() (string, map[string]any) {
	return "status", map[string]any{ToolPending: toolPendingJSON{}, ToolRunning: toolRunningJSON{},
		ToolCompleted: toolCompletedJSON{}, ToolError: toolErrorJSON{}}
}

// MarshalJSON encodes the state with exactly the fields its status has.
func (s ToolState) MarshalJSON() ([]byte, error) {
	input := s.Input
	if !isObject(input) {
		// opencode's schema wants an object; what the model sent is in raw.
		input = json.RawMessage("{}")
	}
	switch s.Status {
	case ToolPending:
		return json.Marshal(toolPendingJSON{s.Status, input, s.Raw})
	case ToolRunning:
		return json.Marshal(toolRunningJSON{Status: s.Status, Input: input, Title: s.Title, Metadata: s.Metadata,
			Time: startTime{s.Time.Start}})
	case ToolCompleted:
		md := s.Metadata
		if md == nil {
			md = map[string]any{}
		}
		return json.Marshal(toolCompletedJSON{s.Status, input, s.Output, s.Title, md, s.Time})
	default:
		return json.Marshal(toolErrorJSON{s.Status, input, s.Error, s.Metadata, s.Time})
	}
}

// StoredInput is a call's input as its state's JSON carries it, and so as
// a read gives it back: the object the model sent, compact, or {} for
// anything else (what the model sent stays in Raw).
func StoredInput(input json.RawMessage) json.RawMessage {
	if !isObject(input) {
		return json.RawMessage("{}")
	}
	// Compact and escaped, as encoding the state leaves it.
	b, err := json.Marshal(input)
	if err != nil {
		return json.RawMessage("{}")
	}
	return b
}

// isObject reports whether b is a JSON object.
func isObject(b json.RawMessage) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '{':
			return json.Valid(b)
		}
		return false
	}
	return false
}

// idleMeta is how an idle part travels: opencode's schema has no part type
// for it, so it is an empty, synthetic, ignored text part whose metadata
// carries the run's outcome under the "agentd" key.
type idleMeta struct {
	Type    PartType `json:"type"`
	RunID   string   `json:"runID"`
	Outcome RunState `json:"outcome"`
	Reason  string   `json:"reason,omitempty"`
	Error   *Error   `json:"error,omitempty"`
}

// Part is one piece of a message. Which fields are meaningful depends on
// Type; MarshalJSON writes exactly the fields of opencode's shape for that
// type (plus agentd's idle part).
type Part struct {
	ID        string
	SessionID string
	MessageID string
	Type      PartType

	// text, reasoning
	Text      string
	Synthetic bool
	// Ignored marks text kept in the transcript but never shown to the
	// model (opencode's: a plugin's notice in the conversation).
	Ignored bool
	Time    PartTime

	// tool
	CallID string
	Tool   string
	State  ToolState

	// step-start, step-finish: the workspace's snapshot (a tree of the
	// snapshot store) when the step began or ended.
	Snapshot string

	// step-finish
	Reason string
	Cost   float64
	Tokens Tokens

	// patch: the files a step changed, and the snapshot from before the
	// change (which a revert restores them from).
	Hash  string
	Files []string

	// file; Source is where the client took it from (opencode's
	// FilePartSource, kept as the client sent it: the TUI puts an @mention
	// back in place with it).
	Mime     string
	Filename string
	URL      string
	Source   json.RawMessage

	// compaction: Auto is false for a compaction a client asked for;
	// Overflow when the provider refused a request as too long; TailStart
	// is the first message kept verbatim after the summary ("" for none).
	Auto      bool
	Overflow  bool
	TailStart string

	// idle (agentd's own; see idleMeta for how it travels)
	RunID   string
	Outcome RunState
	Error   *Error

	Metadata map[string]any
}

// ReasoningMetadata is the metadata of a reasoning part that the provider
// signed with sig, where opencode keeps the signature (by provider).
func ReasoningMetadata(sig string) map[string]any {
	return map[string]any{"anthropic": map[string]any{"signature": sig}}
}

// ReasoningSignature is the provider's signature held in a reasoning
// part's metadata md ("" for none: such reasoning is not sent back).
func ReasoningSignature(md map[string]any) string {
	an, _ := md["anthropic"].(map[string]any)
	sig, _ := an["signature"].(string)
	return sig
}

// agentdMetaKey is the metadata key under which agentd's own part data
// travels.
const agentdMetaKey = "agentd"

// partWire is the union of every part field, used to decode.
type partWire struct {
	ID        string          `json:"id"`
	SessionID string          `json:"sessionID"`
	MessageID string          `json:"messageID"`
	Type      PartType        `json:"type"`
	Text      string          `json:"text"`
	Synthetic bool            `json:"synthetic"`
	Ignored   bool            `json:"ignored"`
	Time      json.RawMessage `json:"time"`
	CallID    string          `json:"callID"`
	Tool      string          `json:"tool"`
	State     struct {
		ToolState
	} `json:"state"`
	Snapshot  string         `json:"snapshot"`
	Reason    string         `json:"reason"`
	Cost      float64        `json:"cost"`
	Tokens    Tokens         `json:"tokens"`
	Hash      string         `json:"hash"`
	Files     []string       `json:"files"`
	Mime      string         `json:"mime"`
	Filename  string         `json:"filename"`
	URL       string         `json:"url"`
	Auto      bool           `json:"auto"`
	Overflow  bool           `json:"overflow"`
	TailStart string         `json:"tail_start_id"`
	RunID     string         `json:"runID"`
	Outcome   RunState       `json:"outcome"`
	Error     *Error         `json:"error"`
	Metadata  map[string]any `json:"metadata"`

	// Source is a file part's.
	Source json.RawMessage `json:"source"`
}

// UnmarshalJSON decodes any part shape.
func (p *Part) UnmarshalJSON(b []byte) error {
	var w partWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*p = Part{ID: w.ID, SessionID: w.SessionID, MessageID: w.MessageID, Type: w.Type,
		Text: w.Text, Synthetic: w.Synthetic, Ignored: w.Ignored, CallID: w.CallID, Tool: w.Tool, State: w.State.ToolState,
		Snapshot: w.Snapshot, Hash: w.Hash, Files: w.Files,
		Reason: w.Reason, Cost: w.Cost, Tokens: w.Tokens, Mime: w.Mime, Filename: w.Filename, URL: w.URL, Source: w.Source,
		Auto: w.Auto, Overflow: w.Overflow, TailStart: w.TailStart, RunID: w.RunID, Outcome: w.Outcome, Error: w.Error, Metadata: w.Metadata}
	if w.Type == PartText && w.Metadata != nil {
		if raw, ok := w.Metadata[agentdMetaKey]; ok {
			b, _ := json.Marshal(raw)
			var im idleMeta
			if json.Unmarshal(b, &im) == nil && im.Type == PartIdle {
				p.Type, p.Text, p.Synthetic, p.Ignored = PartIdle, "", false, false
				p.RunID, p.Outcome, p.Reason, p.Error = im.RunID, im.Outcome, im.Reason, im.Error
				p.Metadata = nil
			}
		}
	}
	if len(w.Time) > 0 && w.Time[0] == '{' {
		var t struct {
			Start   int64 `json:"start"`
			End     int64 `json:"end"`
			Created int64 `json:"created"`
		}
		if err := json.Unmarshal(w.Time, &t); err != nil {
			return err
		}
		p.Time = PartTime{Start: t.Start, End: t.End}
		if p.Type == PartIdle {
			// An idle part's time is one moment; parts written before
			// idle parts travelled as text parts call it created.
			p.Time = PartTime{Start: max(t.Start, t.Created)}
		}
	}
	return nil
}

// UnmarshalJSON for ToolState avoids recursion through MarshalJSON's shapes.
func (s *ToolState) UnmarshalJSON(b []byte) error {
	type plain ToolState
	return json.Unmarshal(b, (*plain)(s))
}

// partHead leads every part's shape.
type partHead struct {
	ID        string   `json:"id"`
	SessionID string   `json:"sessionID"`
	MessageID string   `json:"messageID"`
	Type      PartType `json:"type"`
}

// The shapes of a part, by type: opencode's, plus agentd's idle part,
// which travels as an ignored text part.
type (
	textPartJSON struct {
		partHead
		Text      string         `json:"text"`
		Synthetic bool           `json:"synthetic,omitempty"`
		Ignored   bool           `json:"ignored,omitempty"`
		Time      *PartTime      `json:"time,omitempty"`
		Metadata  map[string]any `json:"metadata,omitempty"`
	}
	reasoningPartJSON struct {
		partHead
		Text     string         `json:"text"`
		Metadata map[string]any `json:"metadata,omitempty"`
		Time     PartTime       `json:"time"`
	}
	toolPartJSON struct {
		partHead
		CallID   string         `json:"callID"`
		Tool     string         `json:"tool"`
		State    ToolState      `json:"state"`
		Metadata map[string]any `json:"metadata,omitempty"`
	}
	stepStartJSON struct {
		partHead
		Snapshot string `json:"snapshot,omitempty"`
	}
	stepFinishJSON struct {
		partHead
		Reason   string  `json:"reason"`
		Snapshot string  `json:"snapshot,omitempty"`
		Cost     float64 `json:"cost"`
		Tokens   Tokens  `json:"tokens"`
	}
	patchPartJSON struct {
		partHead
		Hash  string   `json:"hash"`
		Files []string `json:"files"`
	}
	filePartJSON struct {
		partHead
		Mime     string          `json:"mime"`
		Filename string          `json:"filename,omitempty"`
		URL      string          `json:"url"`
		Source   json.RawMessage `json:"source,omitempty"`
	}
	compactionPartJSON struct {
		partHead
		Auto      bool   `json:"auto"`
		Overflow  bool   `json:"overflow,omitempty"`
		TailStart string `json:"tail_start_id,omitempty"`
	}
	idlePartJSON struct {
		partHead
		Text      string              `json:"text"`
		Synthetic bool                `json:"synthetic"`
		Ignored   bool                `json:"ignored"`
		Time      PartTime            `json:"time"`
		Metadata  map[string]idleMeta `json:"metadata"`
	}
)

// JSONVariants names the shapes of a part, by type (for the API
// document). An idle part is a text part there.
func (Part) JSONVariants() (string, map[string]any) {
	return "type", map[string]any{string(PartText): textPartJSON{}, string(PartReasoning): reasoningPartJSON{}, string(PartTool): toolPartJSON{},
		string(PartStepStart): stepStartJSON{}, string(PartStepFinish): stepFinishJSON{}, string(PartPatch): patchPartJSON{},
		string(PartFile): filePartJSON{}, string(PartCompaction): compactionPartJSON{}}
}

// MarshalJSON encodes p in opencode's shape for its type.
func (p Part) MarshalJSON() ([]byte, error) {
	h := partHead{p.ID, p.SessionID, p.MessageID, p.Type}
	switch p.Type {
	case PartText:
		var tm *PartTime
		if p.Time.Start != 0 {
			t := p.Time
			tm = &t
		}
		return json.Marshal(textPartJSON{h, p.Text, p.Synthetic, p.Ignored, tm, p.Metadata})
	case PartReasoning:
		return json.Marshal(reasoningPartJSON{h, p.Text, p.Metadata, p.Time})
	case PartTool:
		return json.Marshal(toolPartJSON{h, p.CallID, p.Tool, p.State, p.Metadata})
	case PartStepStart:
		return json.Marshal(stepStartJSON{h, p.Snapshot})
	case PartStepFinish:
		return json.Marshal(stepFinishJSON{h, p.Reason, p.Snapshot, p.Cost, p.Tokens})
	case PartPatch:
		files := p.Files
		if files == nil {
			files = []string{}
		}
		return json.Marshal(patchPartJSON{h, p.Hash, files})
	case PartFile:
		return json.Marshal(filePartJSON{h, p.Mime, p.Filename, p.URL, p.Source})
	case PartCompaction:
		return json.Marshal(compactionPartJSON{h, p.Auto, p.Overflow, p.TailStart})
	case PartIdle:
		// Without an end time: opencode's clients print a text part once
		// it has ended, and this one must never be printed.
		h.Type = PartText
		return json.Marshal(idlePartJSON{h, "", true, true, PartTime{Start: p.Time.Start},
			map[string]idleMeta{agentdMetaKey: {Type: PartIdle, RunID: p.RunID, Outcome: p.Outcome, Reason: p.Reason, Error: p.Error}}})
	default:
		return json.Marshal(struct {
			partHead
			Metadata map[string]any `json:"metadata,omitempty"`
		}{h, p.Metadata})
	}
}
