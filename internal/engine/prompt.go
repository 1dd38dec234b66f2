package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// InputPart is one part of a prompt, in opencode's input shapes.
type InputPart struct {
	ID   string `json:"id,omitempty"`
	Type string `json:"type" doc:"required"`
	Text string `json:"text,omitempty"`
	// Synthetic marks text a client added (opencode's input shape).
	Synthetic bool   `json:"synthetic,omitempty"`
	Mime      string `json:"mime,omitempty"`
	URL       string `json:"url,omitempty"`
	Filename  string `json:"filename,omitempty"`
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
	Policy string
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
		switch p.Type {
		case core.PartText:
		case core.PartFile:
			if p.URL == "" || p.Mime == "" {
				return &InputError{fmt.Sprintf("parts[%d]: a file part needs mime and url", i)}
			}
		default:
			return &InputError{fmt.Sprintf("parts[%d].type: unsupported part type %q (want text or file)", i, p.Type)}
		}
		if len(p.Mime)+len(p.Filename) > maxPartMetaSize {
			return &InputError{fmt.Sprintf("parts[%d]: mime and filename over the limit of %d bytes", i, maxPartMetaSize)}
		}
		if p.ID != "" && !core.ValidID(core.PrefixPart, p.ID) {
			return &InputError{fmt.Sprintf("parts[%d].id: %q is not a part id (prt_…)", i, p.ID)}
		}
	}
	if in.MessageID != "" && !core.ValidID(core.PrefixMessage, in.MessageID) {
		return &InputError{fmt.Sprintf("messageID: %q is not a message id (msg_…)", in.MessageID)}
	}
	if !ValidPolicy(in.Policy) {
		return &InputError{fmt.Sprintf("busy: unknown busy policy %q (want steer, queue, reject or interrupt)", in.Policy)}
	}
	if in.Model != nil && (strings.TrimSpace(in.Model.ProviderID) == "" || strings.TrimSpace(in.Model.ModelID) == "") {
		return &InputError{"model: providerID and modelID are both required"}
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
	e.mu.Lock()
	closing := e.closing || !e.started
	e.mu.Unlock()
	if closing {
		return Admission{}, ErrClosed
	}
	ag, ok := e.agentFor(in.Agent)
	switch {
	case !ok:
		return Admission{}, &InputError{fmt.Sprintf("agent: no agent %q (GET /agent lists them)", in.Agent)}
	case !ag.Primary() && !in.subagent:
		return Admission{}, &InputError{fmt.Sprintf("agent: %q is a subagent; it answers the task tool, not prompts", in.Agent)}
	}
	sess, err := e.st.Session(ctx, sessionID)
	if err != nil {
		return Admission{}, err
	}
	// The model: the prompt's, else the agent's, else the session's, else
	// the server's default.
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
		return Admission{}, &InputError{fmt.Sprintf("model: %v", err)}
	}
	policy := in.Policy
	if policy == "" {
		policy = PolicySteer
	}
	if in.Compact && policy == PolicySteer {
		// A compaction is its own run; it waits for the running one.
		policy = PolicyQueue
	}
	titled := false
	var adm Admission
	var supersede []string
	err = e.st.Tx(ctx, func(tx store.Tx) error {
		adm, supersede, titled = Admission{}, nil, false
		if err := tx.LockSession(ctx, sessionID); err != nil {
			return err
		}
		sess, err := tx.Session(ctx, sessionID)
		if err != nil {
			return err
		}
		if in.MessageID != "" {
			prev, err := tx.Message(ctx, sessionID, in.MessageID)
			if err == nil {
				adm = Admission{RunID: prev.Info.RunID, MessageID: prev.Info.ID, Duplicate: true}
				return nil
			}
			if !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		active, err := tx.ActiveRuns(ctx, sessionID)
		if err != nil {
			return err
		}
		if sess.Revert != nil && !in.NoReply {
			w := writer{ctx: ctx, tx: tx}
			if err := retireReverted(ctx, tx, &w, &sess); err != nil {
				return err
			}
		}
		now := e.now()
		msg := core.Message{
			ID: in.MessageID, SessionID: sessionID, Role: core.RoleUser, Created: now,
			Agent: ag.Name, Model: model, System: in.System, Format: in.Format,
		}
		if in.Compact {
			msg.Agent = compactionAgent
		}
		if msg.ID == "" {
			msg.ID = core.NewID(core.PrefixMessage, false)
		}
		adm.MessageID = msg.ID
		var newRun *core.Run
		switch {
		case in.NoReply:
		case in.Shell != "" && len(active) > 0:
			return ErrSessionBusy
		case len(active) == 0:
			// Nothing runs in the session: this node starts the run at once,
			// so it is admitted running (one commit less per turn). A crash
			// before its first step is recovered like any cut-off run.
			newRun = &core.Run{ID: core.NewID(core.PrefixRun, false), SessionID: sessionID, State: core.RunRunning,
				UserMessageID: msg.ID, Model: model, Agent: ag.Name, Time: core.RunTime{Created: now, Started: now}}
		case policy == PolicyReject:
			return ErrBusy
		case policy == PolicySteer:
			msg.RunID = active[0].ID
			adm.RunID, adm.Steered = active[0].ID, true
		case policy == PolicyQueue, policy == PolicyInterrupt:
			newRun = &core.Run{ID: core.NewID(core.PrefixRun, false), SessionID: sessionID, State: core.RunQueued,
				UserMessageID: msg.ID, Model: model, Agent: ag.Name, Time: core.RunTime{Created: now}}
			if policy == PolicyInterrupt {
				for _, r := range active {
					supersede = append(supersede, r.ID)
				}
			}
		}
		if newRun != nil {
			newRun.Shell = in.Shell
			msg.RunID = newRun.ID
			adm.RunID = newRun.ID
		}
		if err := tx.InsertMessage(ctx, msg); err != nil {
			if errors.Is(err, store.ErrConflict) {
				return &IDConflictError{What: "message", ID: msg.ID}
			}
			return err
		}
		w := writer{ctx: ctx, tx: tx}
		w.messageEvent(msg)
		for _, ip := range in.Parts {
			p := core.Part{ID: ip.ID, SessionID: sessionID, MessageID: msg.ID, Type: ip.Type,
				Text: ip.Text, Synthetic: ip.Synthetic, Mime: ip.Mime, URL: ip.URL, Filename: ip.Filename}
			if p.ID == "" {
				p.ID = core.NewID(core.PrefixPart, false)
			}
			// User text parts carry no time, as opencode's: clients such as
			// opencode run print every text part that has ended.
			w.part(p)
			if errors.Is(w.err, store.ErrConflict) {
				return &IDConflictError{What: "part", ID: p.ID}
			}
		}
		if in.Compact {
			w.part(core.Part{ID: core.NewID(core.PrefixPart, false), SessionID: sessionID, MessageID: msg.ID, Type: core.PartCompaction})
		}
		titled = !in.Compact && in.Shell == "" && core.IsDefaultTitle(sess.Title)
		if newRun != nil {
			if err := tx.InsertRun(ctx, *newRun); err != nil {
				return err
			}
			w.runEvent(*newRun)
			if len(active) == 0 {
				w.status(sessionID, core.StatusOf(newRun, nil))
			}
		}
		sess.Time.Updated = now
		w.session(sess)
		return w.err
	})
	if err != nil {
		return Admission{}, err
	}
	for _, id := range supersede {
		if err := e.abortRun(ctx, id, core.ReasonSuperseded); err != nil {
			e.log.Warn("supersede run", "run", id, "err", err)
		}
	}
	if adm.RunID != "" {
		if !adm.Steered && !adm.Duplicate {
			e.cfg.Metrics.RunStarted()
			e.admitted(ctx, adm.RunID)
		}
		e.kick(sessionID)
	}
	if titled {
		e.titleLater(sessionID, model, in.Parts)
	}
	return adm, nil
}

// writer batches the writes of one transaction and remembers the first
// error, so transaction bodies read as a list of changes.
type writer struct {
	ctx context.Context
	tx  store.Tx
	err error
}

func (w *writer) event(sessionID, typ string, props any) {
	if w.err != nil {
		return
	}
	ev, err := core.NewEvent(sessionID, typ, props)
	if err != nil {
		w.err = fmt.Errorf("encode %s: %w", typ, err)
		return
	}
	w.err = w.tx.AppendEvent(w.ctx, ev)
}

func (w *writer) part(p core.Part) {
	if w.err != nil {
		return
	}
	if w.err = w.tx.PutPart(w.ctx, p); w.err == nil {
		w.event(p.SessionID, core.EventPartUpdated, core.PartProps{SessionID: p.SessionID, Part: p, Time: time.Now().UnixMilli()})
	}
}

// todos replaces a session's todo list and says so with opencode's event.
func (w *writer) todos(sessionID string, todos []core.Todo) {
	if w.err != nil {
		return
	}
	if w.err = w.tx.PutTodos(w.ctx, sessionID, todos); w.err == nil {
		w.event(sessionID, core.EventTodoUpdated, map[string]any{"sessionID": sessionID, "todos": todos})
	}
}

func (w *writer) message(m core.Message) {
	if w.err != nil {
		return
	}
	if w.err = w.tx.PutMessage(w.ctx, m); w.err == nil {
		w.messageEvent(m)
	}
}

func (w *writer) messageEvent(m core.Message) {
	w.event(m.SessionID, core.EventMessageUpdated, core.MessageProps{SessionID: m.SessionID, Info: m})
}

func (w *writer) session(s core.Session) {
	if w.err != nil {
		return
	}
	if w.err = w.tx.UpdateSession(w.ctx, s); w.err == nil {
		w.event(s.ID, core.EventSessionUpdated, core.SessionProps{SessionID: s.ID, Info: s})
	}
}

func (w *writer) run(r core.Run) {
	if w.err != nil {
		return
	}
	if w.err = w.tx.UpdateRun(w.ctx, r); w.err == nil {
		w.runEvent(r)
	}
}

func (w *writer) runEvent(r core.Run) {
	w.event(r.SessionID, core.EventRunUpdated, core.RunProps{Run: r})
}

// status publishes session.status in opencode's strict shape.
func (w *writer) status(sessionID string, st core.SessionStatus) {
	w.event(sessionID, core.EventSessionStatus, core.StatusEventProps{SessionID: sessionID, Status: st.Opencode()})
}
