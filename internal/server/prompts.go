package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/engine"
	"github.com/agentd/agentd/internal/store"
)

type promptBody struct {
	MessageID string             `json:"messageID"`
	Model     *core.ModelRef     `json:"model"`
	Agent     string             `json:"agent"`
	NoReply   bool               `json:"noReply"`
	System    string             `json:"system"`
	Parts     []engine.InputPart `json:"parts" doc:"required"`
	Busy      core.BusyPolicy    `json:"busy"`
	Variant   string             `json:"variant"`
	Format    *core.OutputFormat `json:"format"`
	// Interactive false: nobody will answer this run's asks; the
	// operator's rules (agentd.asks) answer them at once.
	Interactive *bool `json:"interactive"`
	// CallbackURL is reported (webhook run.ended) when the run that
	// answers this prompt ends.
	CallbackURL string `json:"callbackUrl"`
}

func (s *Server) admit(r *http.Request) (engine.Admission, *apiError) {
	var in promptBody
	if e := decodeJSON(r, &in, false); e != nil {
		return engine.Admission{}, e
	}
	policy := in.Busy
	if q := r.URL.Query().Get("busy"); q != "" {
		policy = core.BusyPolicy(q)
	}
	forget, e := s.callback(r, &in.MessageID, in.CallbackURL, in.NoReply)
	if e != nil {
		return engine.Admission{}, e
	}
	adm, err := s.eng.Prompt(r.Context(), r.PathValue("id"), engine.PromptInput{
		MessageID: in.MessageID, Parts: in.Parts, Model: in.Model, Agent: in.Agent,
		System: in.System, Policy: policy, NoReply: in.NoReply, Variant: in.Variant, Format: in.Format,
		Interactive: in.Interactive,
	})
	if err != nil {
		forget()
		return adm, s.storeErr(err, "session "+r.PathValue("id"))
	}
	return adm, nil
}

// prompt admits a prompt and answers when its run has ended: with the
// run's last assistant message when it succeeded or was interrupted, and
// with the run's error (502 for a provider's, 500 otherwise) when it
// failed, so that a client that only looks at the status code (opencode
// run) does not report a failure as a success. A client that goes away
// before the end aborts the run it started: the request owns it.
// Before answering, every open event stream is given a moment to send
// the run's last events, so a client that also follows /event sees them
// before the answer.
func (s *Server) prompt(w http.ResponseWriter, r *http.Request) *apiError {
	adm, e := s.admit(r)
	if e != nil {
		return e
	}
	return s.answerRun(w, r, adm)
}

// answerRun answers a blocking prompt once its run has ended (see prompt).
func (s *Server) answerRun(w http.ResponseWriter, r *http.Request, adm engine.Admission) *apiError {
	id := r.PathValue("id")
	if adm.RunID == "" {
		m, err := s.st.Message(r.Context(), id, adm.MessageID)
		if err != nil {
			return s.storeErr(err, "message")
		}
		writeJSON(w, http.StatusOK, m)
		return nil
	}
	run, err := s.eng.WaitRun(r.Context(), adm.RunID)
	if err != nil {
		if r.Context().Err() != nil && !adm.Steered && !adm.Duplicate {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
			defer cancel()
			if err := s.eng.AbortRun(ctx, id, adm.RunID); err != nil {
				s.log.Warn("abort run of a prompt whose client went away", "run", adm.RunID, "err", err)
			}
		}
		return s.storeErr(err, "run "+adm.RunID)
	}
	head, _ := s.hub.Head()
	if s.hub.WaitDelivered(r.Context(), head, deliveryGrace) {
		// A client that follows the stream and exits once its prompt is
		// answered (opencode run --attach) reads the answer and the
		// stream on two connections: the events were sent first, and get
		// a moment to be read first.
		t := time.NewTimer(streamSettle)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
		}
	}
	failed := run.State == core.RunFailed && run.Error != nil
	if failed && errorsAsStatus(r) {
		writeRunError(w, run.Error)
		return nil
	}
	m, err := s.lastAssistant(r.Context(), id, adm.RunID)
	if errors.Is(err, store.ErrNotFound) && failed {
		// No message carries the error (the run failed before its first
		// step): the status says it.
		writeRunError(w, run.Error)
		return nil
	}
	if err != nil {
		return s.storeErr(err, "message")
	}
	if failed && m.Info.Error == nil {
		m.Info.Error = run.Error
	}
	writeJSON(w, http.StatusOK, m)
	return nil
}

// errorsAsStatus reports whether the client asked for a failed run to be
// answered with an error status (X-Agentd-Errors: status, or
// ?errors=status) rather than, as opencode answers, 200 with the error in
// the message.
func errorsAsStatus(r *http.Request) bool {
	return r.Header.Get("X-Agentd-Errors") == "status" || r.URL.Query().Get("errors") == "status"
}

// writeRunError answers a failed run with its error: 502 for a
// provider's, 500 otherwise.
func writeRunError(w http.ResponseWriter, e *core.Error) {
	status := http.StatusInternalServerError
	if e.Name == core.ErrNameAPI || e.Name == core.ErrNameProviderAuth {
		status = http.StatusBadGateway
	}
	writeJSON(w, status, e)
}

// deliveryGrace bounds how long a blocking prompt waits for event streams
// to send the run's last events; a slow stream does not hold it longer.
// It is only paid for a stream that is behind: a stream that keeps up
// sends in milliseconds, but on a loaded machine (two cores, the race
// detector, other work) a stream's goroutine can wait longer than the
// 250 ms this was, and opencode run --attach then prints nothing.
// streamSettle is the moment they then get to be read.
const (
	deliveryGrace = time.Second
	streamSettle  = 30 * time.Millisecond
)

// lastAssistant returns the run's last assistant message with its parts.
func (s *Server) lastAssistant(ctx context.Context, sessionID, runID string) (core.MessageWithParts, error) {
	m, err := s.st.LastRunMessage(ctx, runID, core.RoleAssistant)
	if errors.Is(err, store.ErrNotFound) {
		return m, fmt.Errorf("run %s has no assistant message: %w", runID, store.ErrNotFound)
	}
	if err == nil && m.Info.SessionID != sessionID {
		return core.MessageWithParts{}, fmt.Errorf("run %s is not session %s's: %w", runID, sessionID, store.ErrNotFound)
	}
	return m, err
}

func (s *Server) listCommands(w http.ResponseWriter, r *http.Request) *apiError {
	dir, e := s.directory(r)
	if e != nil {
		return e
	}
	writeList(w, r, s.commandsFor(dir).List(), false, nil)
	return nil
}

// commandBody is the request of POST /session/{id}/command.
type commandBody struct {
	MessageID string `json:"messageID"`
	Agent     string `json:"agent"`
	Model     string `json:"model"`
	Arguments string `json:"arguments"`
	Command   string `json:"command" doc:"required"`
	Variant   string `json:"variant"`
	// Parts are files sent along with the command.
	Parts []engine.InputPart `json:"parts"`
}

// runCommand runs a custom command: its template, filled with the
// arguments, as a prompt to the command's agent and model (the request's
// win), answered like a blocking prompt. A subtask command runs in the
// session itself: agentd has no subagents yet.
func (s *Server) runCommand(w http.ResponseWriter, r *http.Request) *apiError {
	var in commandBody
	if e := decodeJSON(r, &in, false); e != nil {
		return e
	}
	adm, e := s.command(r, in.Command, in.Arguments, in.MessageID, in.Agent, in.Model, in.Variant, in.Parts)
	if e != nil {
		return e
	}
	return s.answerRun(w, r, adm)
}

// command admits a command of the session's directory as a prompt: its
// template filled with the arguments, the files sent along, its agent and
// model unless the request names others.
func (s *Server) command(r *http.Request, name, args, messageID, agent, model, variant string, files []engine.InputPart) (engine.Admission, *apiError) {
	id := r.PathValue("id")
	sess, err := s.st.Session(r.Context(), id)
	if err != nil {
		return engine.Admission{}, s.storeErr(err, "session "+id)
	}
	c, ok := s.commandsFor(sess.Directory)[strings.TrimPrefix(name, "/")]
	if !ok {
		return engine.Admission{}, notFound("command %q not found (GET /command lists them)", name)
	}
	pi := engine.PromptInput{MessageID: messageID, Agent: agent, Variant: variant,
		Parts: append([]engine.InputPart{{Type: core.PartText, Text: commandText(c, args)}}, files...)}
	if agent == "" {
		if pi.Agent, err = s.cfg.Commands.Agent(c); err != nil {
			return engine.Admission{}, &apiError{status: http.StatusForbidden, name: "ForbiddenError", msg: err.Error()}
		}
	}
	if model == "" {
		model = c.Model
	}
	if model != "" {
		ref, err := config.ParseModel(model)
		if err != nil {
			return engine.Admission{}, badRequest("model %q: %v", model, err)
		}
		pi.Model = &ref
	}
	if s.cfg.CommandHook != nil {
		if err := s.cfg.CommandHook(r.Context(), sess.Directory, id, c.Name, args, &pi.Parts); err != nil {
			return engine.Admission{}, s.storeErr(err, "command "+name)
		}
	}
	adm, err := s.eng.Prompt(r.Context(), id, pi)
	if err != nil {
		return adm, s.storeErr(err, "session "+id)
	}
	return adm, nil
}

// initBody is the request of POST /session/{id}/init.
type initBody struct {
	ModelID    string `json:"modelID"`
	ProviderID string `json:"providerID"`
	MessageID  string `json:"messageID"`
}

// initProject runs the init command (opencode's session.init) and answers
// true once its run has ended.
func (s *Server) initProject(w http.ResponseWriter, r *http.Request) *apiError {
	var in initBody
	if e := decodeJSON(r, &in, true); e != nil {
		return e
	}
	model := ""
	if in.ProviderID != "" && in.ModelID != "" {
		model = in.ProviderID + "/" + in.ModelID
	}
	adm, e := s.command(r, "init", "", in.MessageID, "", model, "", nil)
	if e != nil {
		return e
	}
	if _, err := s.eng.WaitRun(r.Context(), adm.RunID); err != nil {
		return s.storeErr(err, "run")
	}
	writeJSON(w, http.StatusOK, true)
	return nil
}

// disposeInstance drops what is cached for the request's directory.
func (s *Server) disposeInstance(w http.ResponseWriter, r *http.Request) *apiError {
	dir, e := s.directory(r)
	if e != nil {
		return e
	}
	s.cfg.Commands.Forget(dir)
	if s.cfg.Skills != nil {
		s.cfg.Skills.Forget(dir)
	}
	s.hub.PublishLive(core.MustEvent("", "server.instance.disposed", map[string]string{"directory": dir}))
	writeJSON(w, http.StatusOK, true)
	return nil
}

func (s *Server) promptAsync(w http.ResponseWriter, r *http.Request) *apiError {
	if _, e := s.admit(r); e != nil {
		return e
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// summarizeBody is the request of POST /session/{id}/summarize.
type summarizeBody struct {
	ProviderID string `json:"providerID"`
	ModelID    string `json:"modelID"`
}

// summarize compacts the session (opencode's summarize): a run of its own
// that writes a summary later prompts start from. It answers true once
// the compaction has ended, like opencode.
func (s *Server) summarize(w http.ResponseWriter, r *http.Request) *apiError {
	var in summarizeBody
	if e := decodeJSON(r, &in, true); e != nil {
		return e
	}
	pi := engine.PromptInput{Compact: true}
	if in.ProviderID != "" || in.ModelID != "" {
		pi.Model = &core.ModelRef{ProviderID: in.ProviderID, ModelID: in.ModelID}
	}
	adm, err := s.eng.Prompt(r.Context(), r.PathValue("id"), pi)
	if err != nil {
		return s.storeErr(err, "session "+r.PathValue("id"))
	}
	run, err := s.eng.WaitRun(r.Context(), adm.RunID)
	if err != nil {
		return s.storeErr(err, "run "+adm.RunID)
	}
	if run.State == core.RunFailed && run.Error != nil {
		writeJSON(w, http.StatusInternalServerError, run.Error)
		return nil
	}
	writeJSON(w, http.StatusOK, run.State == core.RunSucceeded)
	return nil
}
