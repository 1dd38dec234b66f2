package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentd/agentd/internal/agent"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/modelview"
	"github.com/agentd/agentd/internal/plugin"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/undo"
)

// InputPart is one part of a prompt, in opencode's input shapes.
type InputPart struct {
	ID   string        `json:"id,omitempty"`
	Type core.PartType `json:"type" doc:"required"`
	Text string        `json:"text,omitempty"`
	// Synthetic marks text a client added (opencode's input shape).
	Synthetic bool   `json:"synthetic,omitempty"`
	Ignored   bool   `json:"ignored,omitempty"` // kept, never shown to the model
	Mime      string `json:"mime,omitempty"`
	URL       string `json:"url,omitempty"`
	Filename  string `json:"filename,omitempty"`
	// Source is where a file part came from (opencode's FilePartSource,
	// kept as sent: the TUI puts an @mention back in place with it).
	Source json.RawMessage `json:"source,omitempty"`
}

// PromptInput is a prompt as admitted by the engine.
type PromptInput struct {
	// MessageID is the client's id for the user message; sending the same
	// one twice never creates a second turn.
	MessageID string
	Parts     []InputPart
	Model     *core.ModelRef
	Agent     string
	System    string
	// Policy is the busy policy; "" means steer.
	Policy core.BusyPolicy
	// NoReply records the message without running the model.
	NoReply bool
	// Variant picks a named set of the model's options.
	Variant string
	// Compact asks for a compaction of the session instead of an answer
	// (opencode's summarize); Parts are then empty.
	Compact bool
	// Format asks for structured output (json_schema): the answer comes
	// as JSON of the schema, in the last message's structured field.
	Format *core.OutputFormat
	// Shell is a command the user runs themselves (opencode's shell
	// mode): the run executes it with the bash tool instead of calling the
	// model. The session must be idle (ErrSessionBusy otherwise).
	Shell string
	// Interactive false has the asks of the run the prompt starts
	// answered by the operator's rules at once (package asks).
	Interactive *bool
	// subagent admits a prompt for a subagent: the task tool's.
	subagent bool
}

// Admission says what became of a prompt.
type Admission struct {
	RunID     string
	MessageID string
	// Duplicate is true when the messageID had been admitted before.
	Duplicate bool
	// Steered is true when the message joined an already running run.
	Steered bool
}

// Budgets of a prompt: far above what a person or an SDK sends, and each
// part becomes a row and an event.
const (
	MaxPromptParts  = 256
	MaxSystemBytes  = 64 << 10
	maxPartMetaSize = 4 << 10
)

// Validate checks a prompt before anything is written.
func (in *PromptInput) Validate() error {
	if len(in.Parts) == 0 && !in.Compact {
		return &InputError{"parts: at least one part is required"}
	}
	if len(in.Parts) > MaxPromptParts {
		return &InputError{fmt.Sprintf("parts: %d parts is over the limit of %d", len(in.Parts), MaxPromptParts)}
	}
	if _, err := compileFormat(in.Format); err != nil {
		return &InputError{err.Error()}
	}
	if len(in.System) > MaxSystemBytes {
		return &InputError{fmt.Sprintf("system: %d bytes is over the limit of %d bytes", len(in.System), MaxSystemBytes)}
	}
	for i, p := range in.Parts {
		if err := p.validate(i); err != nil {
			return err
		}
	}
	if in.MessageID != "" && !core.ValidID(core.PrefixMessage, in.MessageID) {
		return &InputError{fmt.Sprintf("messageID: %q is not a message id (msg_…)", in.MessageID)}
	}
	if !in.Policy.Valid() {
		return &InputError{fmt.Sprintf("busy: unknown busy policy %q (want steer, queue, reject or interrupt)", in.Policy)}
	}
	if in.Model != nil && (strings.TrimSpace(in.Model.ProviderID) == "" || strings.TrimSpace(in.Model.ModelID) == "") {
		return &InputError{"model: providerID and modelID are both required"}
	}
	return nil
}

// validate checks the i-th part of a prompt.
func (p InputPart) validate(i int) error {
	switch p.Type {
	case core.PartText:
	case core.PartFile:
		if p.URL == "" || p.Mime == "" {
			return &InputError{fmt.Sprintf("parts[%d]: a file part needs mime and url", i)}
		}
	default:
		return &InputError{fmt.Sprintf("parts[%d].type: unsupported part type %q (want text or file)", i, p.Type)}
	}
	if len(p.Mime)+len(p.Filename)+len(p.Source) > maxPartMetaSize {
		return &InputError{fmt.Sprintf("parts[%d]: mime, filename and source over the limit of %d bytes", i, maxPartMetaSize)}
	}
	if len(p.Source) > 0 && !bytes.HasPrefix(bytes.TrimSpace(p.Source), []byte("{")) {
		return &InputError{fmt.Sprintf("parts[%d].source: want an object (opencode's FilePartSource)", i)}
	}
	if p.ID != "" && !core.ValidID(core.PrefixPart, p.ID) {
		return &InputError{fmt.Sprintf("parts[%d].id: %q is not a part id (prt_…)", i, p.ID)}
	}
	return nil
}

// Prompt durably admits a prompt into the session and returns which run
// will answer it. When it returns without error the prompt is in the
// transcript and will be answered, even across a crash.
func (e *Engine) Prompt(ctx context.Context, sessionID string, in PromptInput) (Admission, error) {
	if err := in.Validate(); err != nil {
		return Admission{}, err
	}
	if e.isClosing() {
		return Admission{}, ErrClosed
	}
	ag, err := e.promptAgent(in)
	if err != nil {
		return Admission{}, err
	}
	sess, err := e.st.Session(ctx, sessionID)
	if err != nil {
		return Admission{}, err
	}
	model, err := e.promptModel(in, ag, sess)
	if err != nil {
		return Admission{}, err
	}
	typed := in.Parts
	if in.Parts, err = e.attachFiles(ctx, in, ag, sess, model); err != nil {
		return Admission{}, err
	}
	hook := plugin.ChatInput{SessionID: sessionID, Directory: sess.Directory, MessageID: in.MessageID, Agent: ag.Name, Model: model, Variant: in.Variant}
	if err := e.cfg.Hooks.ChatMessage(ctx, hook, &in.Parts); err != nil {
		return Admission{}, err
	}
	var res admitted
	admit := func(tx store.Tx) error {
		var err error
		res, err = e.admit(ctx, tx, sessionID, in, ag.Name, model)
		return err
	}
	err = e.st.Tx(ctx, admit)
	if errors.Is(err, undo.ErrReverting) && e.undo.Settle(ctx, sessionID) == nil {
		// A revert left by a node that died has been settled.
		err = e.st.Tx(ctx, admit)
	}
	if err != nil {
		return Admission{}, err
	}
	for _, id := range res.supersede {
		if err := e.abortRun(ctx, id, core.ReasonSuperseded); err != nil {
			e.log.Warn("supersede run", "run", id, "err", err)
		}
	}
	adm := res.Admission
	if adm.RunID != "" {
		if !adm.Steered && !adm.Duplicate {
			e.cfg.Metrics.RunStarted()
			e.admitted(ctx, adm.RunID)
		}
		e.kick(sessionID)
	}
	if res.titled {
		e.titleLater(sessionID, model, typed)
	}
	return adm, nil
}

func (e *Engine) isClosing() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closing || !e.started
}

// promptAgent is the agent a prompt names: one that exists and, unless
// the task tool sends it, a primary one.
func (e *Engine) promptAgent(in PromptInput) (agent.Agent, error) {
	ag, ok := e.agentFor(in.Agent)
	switch {
	case !ok:
		return ag, &InputError{fmt.Sprintf("agent: no agent %q (GET /agent lists them)", in.Agent)}
	case !ag.Primary() && !in.subagent:
		return ag, &InputError{fmt.Sprintf("agent: %q is a subagent; it answers the task tool, not prompts", in.Agent)}
	}
	return ag, nil
}

// promptModel is the model that answers: the prompt's, else the agent's,
// else the session's, else the server's default; it must resolve.
func (e *Engine) promptModel(in PromptInput, ag agent.Agent, sess core.Session) (core.ModelRef, error) {
	model := e.cfg.DefaultModel
	switch {
	case in.Model != nil:
		model = *in.Model
	case ag.Model != nil:
		model = *ag.Model
	case sess.Model != nil:
		model = core.ModelRef{ProviderID: sess.Model.ProviderID, ModelID: sess.Model.ID, Variant: sess.Model.Variant}
	}
	if in.Variant != "" {
		model.Variant = in.Variant
	}
	if _, _, err := e.models.Resolve(model); err != nil {
		return model, &InputError{fmt.Sprintf("model: %v", err)}
	}
	return model, nil
}

// admitted is what one admission transaction decided.
type admitted struct {
	Admission
	// supersede are the runs an interrupt ends once the prompt is in.
	supersede []string
	// titled: the session still has its first title and gets one.
	titled bool
}

// admit writes the prompt in one transaction: the user message and its
// parts, and the run that answers it as the busy policy decides.
func (e *Engine) admit(ctx context.Context, tx store.Tx, sessionID string, in PromptInput, agentName string, model core.ModelRef) (admitted, error) {
	var res admitted
	if err := tx.LockSession(ctx, sessionID); err != nil {
		return res, err
	}
	sess, err := tx.Session(ctx, sessionID)
	if err != nil {
		return res, err
	}
	if dup, err := duplicate(ctx, tx, sessionID, in.MessageID); err != nil || dup != nil {
		if dup != nil {
			res.Admission = *dup
		}
		return res, err
	}
	if err := undo.NotReverting(ctx, tx, sessionID); err != nil {
		return res, err
	}
	active, err := tx.ActiveRuns(ctx, sessionID)
	if err != nil {
		return res, err
	}
	w := writer{ctx: ctx, tx: tx}
	if sess.Revert != nil && !in.NoReply {
		if err := retireReverted(ctx, tx, &w, &sess); err != nil {
			return res, err
		}
	}
	now := e.now()
	msg := userMessage(in, sessionID, agentName, model, now)
	pl, err := place(in, active)
	if err != nil {
		return res, err
	}
	res.MessageID, res.supersede = msg.ID, pl.supersede
	newRun := pl.newRun(msg, agentName, in.Shell, now)
	switch {
	case pl.steer != "":
		msg.RunID = pl.steer
		res.RunID, res.Steered = pl.steer, true
	case newRun != nil:
		msg.RunID, res.RunID = newRun.ID, newRun.ID
	}
	if err := writePrompt(&w, in, msg); err != nil {
		return res, err
	}
	res.titled = !in.Compact && in.Shell == "" && core.IsDefaultTitle(sess.Title)
	if newRun != nil {
		newRun.Interactive = in.Interactive
		if err := tx.InsertRun(ctx, *newRun); err != nil {
			return res, err
		}
		w.runEvent(*newRun)
		if len(active) == 0 {
			w.status(sessionID, core.StatusOf(newRun, nil))
		}
	}
	sess.Time.Updated = now
	w.session(sess)
	return res, w.err
}

// userMessage is the message a prompt becomes (a compaction's names the
// compaction agent); its id is the client's, else a new one.
func userMessage(in PromptInput, sessionID, agentName string, model core.ModelRef, now int64) core.Message {
	msg := core.Message{
		ID: in.MessageID, SessionID: sessionID, Role: core.RoleUser, Created: now,
		Agent: agentName, Model: model, System: in.System, Format: in.Format,
	}
	if in.Compact {
		msg.Agent = modelview.CompactionAgent
	}
	if msg.ID == "" {
		msg.ID = core.NewID(core.PrefixMessage, false)
	}
	return msg
}

// duplicate finds a message id admitted before: its admission again (a
// client's retry makes one turn), or nil.
func duplicate(ctx context.Context, tx store.Tx, sessionID, messageID string) (*Admission, error) {
	if messageID == "" {
		return nil, nil
	}
	prev, err := tx.Message(ctx, sessionID, messageID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &Admission{RunID: prev.Info.RunID, MessageID: prev.Info.ID, Duplicate: true}, nil
}

// newRun is the run a placement starts to answer msg, or nil. Its agent
// is the prompt's (a compaction's message names the compaction agent).
func (pl placement) newRun(msg core.Message, agentName, shell string, now int64) *core.Run {
	if pl.state == "" {
		return nil
	}
	run := &core.Run{ID: core.NewID(core.PrefixRun, false), SessionID: msg.SessionID, State: pl.state,
		UserMessageID: msg.ID, Model: msg.Model, Agent: agentName, Shell: shell, Time: core.RunTime{Created: now}}
	if pl.state == core.RunRunning {
		run.Time.Started = now
	}
	return run
}

// placement is where a prompt goes given the session's active runs.
type placement struct {
	// state is that of a new run answering the prompt ("" for none).
	state core.RunState
	// steer is the active run the prompt joins instead.
	steer string
	// supersede are the active runs an interrupt ends.
	supersede []string
}

// place applies the busy policy. Nothing running: a new run, admitted
// running (this node starts it at once: one commit less per turn; a crash
// before its first step is recovered like any cut-off run). Something
// running: reject, join it (steer), or a queued run after it (queue), which
// interrupt also has the active ones end.
func place(in PromptInput, active []core.Run) (placement, error) {
	policy := in.Policy
	if policy == "" {
		policy = core.PolicySteer
	}
	if in.Compact && policy == core.PolicySteer {
		// A compaction is its own run; it waits for the running one.
		policy = core.PolicyQueue
	}
	switch {
	case in.NoReply:
		return placement{}, nil
	case in.Shell != "" && len(active) > 0:
		return placement{}, ErrSessionBusy
	case len(active) == 0:
		return placement{state: core.RunRunning}, nil
	case policy == core.PolicyReject:
		return placement{}, ErrBusy
	case policy == core.PolicySteer:
		return placement{steer: active[0].ID}, nil
	}
	pl := placement{state: core.RunQueued}
	if policy == core.PolicyInterrupt {
		for _, r := range active {
			pl.supersede = append(pl.supersede, r.ID)
		}
	}
	return pl, nil
}

// writePrompt writes the user message and its parts (and a compaction's
// marker). User text parts carry no time, as opencode's: clients such as
// opencode run print every text part that has ended.
func writePrompt(w *writer, in PromptInput, msg core.Message) error {
	if err := w.tx.InsertMessage(w.ctx, msg); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return &IDConflictError{What: "message", ID: msg.ID}
		}
		return err
	}
	w.messageEvent(msg)
	for _, ip := range in.Parts {
		p := core.Part{ID: ip.ID, SessionID: msg.SessionID, MessageID: msg.ID, Type: ip.Type,
			Text: ip.Text, Synthetic: ip.Synthetic, Ignored: ip.Ignored, Mime: ip.Mime, URL: ip.URL, Filename: ip.Filename, Source: ip.Source}
		if p.ID == "" {
			p.ID = core.NewID(core.PrefixPart, false)
		}
		w.part(p)
		if errors.Is(w.err, store.ErrConflict) {
			return &IDConflictError{What: "part", ID: p.ID}
		}
	}
	if in.Compact {
		w.part(core.Part{ID: core.NewID(core.PrefixPart, false), SessionID: msg.SessionID, MessageID: msg.ID, Type: core.PartCompaction})
	}
	return nil
}
