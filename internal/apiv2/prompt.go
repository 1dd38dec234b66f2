package apiv2

import (
	"bytes"
	"context"
	"encoding/json"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/engine"
	"github.com/agentd/agentd/internal/store"
)

// Prompts, compaction, waiting and interrupting: admissions and aborts go
// to the engine as the v1 routes send them, so a prompt admitted here is
// a run v1's /session/status sees, and the other way round.

// promptBody is what POST /api/session/{id}/prompt takes.
type promptBody struct {
	// ID is the client's id of the prompt: sending it again never makes
	// a second turn (the engine's messageID idempotency).
	ID     string      `json:"id"`
	Prompt promptInput `json:"prompt" doc:"required"`
	// Delivery is steer (join the running run at its next step) or queue
	// (run after it): agentd's busy policies of the same names.
	Delivery string `json:"delivery"`
	// Resume false records the prompt without running the model.
	Resume *bool `json:"resume"`
	// CallbackURL is reported (webhook run.ended) when the run that
	// answers this prompt ends (opencode's callbackUrl).
	CallbackURL string `json:"callbackUrl"`
}

// promptInput is opencode 2's PromptInput.
type promptInput struct {
	Text   string            `json:"text" doc:"required"`
	Files  []fileAttachment  `json:"files"`
	Agents []agentAttachment `json:"agents"`
}

// fileAttachment is a file of a prompt: opencode 2's PromptFileAttachment
// (the input shape has no mime; the answer says which one was used).
type fileAttachment struct {
	URI         string        `json:"uri"`
	Mime        string        `json:"mime,omitempty"`
	Name        string        `json:"name,omitempty"`
	Description string        `json:"description,omitempty"`
	Source      *promptSource `json:"source,omitempty"`
}

type agentAttachment struct {
	Name   string        `json:"name"`
	Source *promptSource `json:"source,omitempty"`
}

// promptSource is where in the prompt's text an attachment was named.
type promptSource struct {
	Start float64 `json:"start"`
	End   float64 `json:"end"`
	Text  string  `json:"text"`
}

// promptJSON is opencode 2's Prompt: the prompt as admitted.
type promptJSON struct {
	Text   string            `json:"text"`
	Files  []fileAttachment  `json:"files,omitempty"`
	Agents []agentAttachment `json:"agents,omitempty"`
}

// admittedJSON is opencode 2's SessionInputAdmitted. AdmittedSeq is the
// seq of the event log's record of the prompt (the same seq on every
// stream).
type admittedJSON struct {
	AdmittedSeq int64      `json:"admittedSeq"`
	ID          string     `json:"id"`
	SessionID   string     `json:"sessionID"`
	Prompt      promptJSON `json:"prompt"`
	Delivery    string     `json:"delivery"`
	TimeCreated int64      `json:"timeCreated"`
}

// agentPrompt is the text an agent attachment adds, as opencode v1 adds
// it for an agent part: the model hands the prompt to that subagent.
const agentPrompt = "Use the above message and context to generate a prompt and call the task tool with subagent: "

// parts turns a prompt into the engine's input parts, filling in each
// file's media type.
func (p *promptInput) parts() []engine.InputPart {
	var out []engine.InputPart
	if p.Text != "" || len(p.Files) == 0 {
		out = append(out, engine.InputPart{Type: core.PartText, Text: p.Text})
	}
	for i := range p.Files {
		f := &p.Files[i]
		f.Mime = mimeOf(f.URI)
		name := f.Name
		if name == "" {
			name = path.Base(strings.TrimPrefix(f.URI, "file://"))
		}
		out = append(out, engine.InputPart{Type: core.PartFile, URL: f.URI, Mime: f.Mime, Filename: name})
	}
	for _, ag := range p.Agents {
		out = append(out, engine.InputPart{Type: core.PartText, Text: agentPrompt + ag.Name, Synthetic: true})
	}
	return out
}

// mimeOf is a file URI's media type: a data URL's own, else its name's,
// else text for a local file and bytes for another.
func mimeOf(uri string) string {
	if rest, ok := strings.CutPrefix(uri, "data:"); ok {
		if head, _, ok := strings.Cut(rest, ","); ok {
			if mt, _, _ := strings.Cut(head, ";"); mt != "" {
				return mt
			}
		}
		return "text/plain"
	}
	name := uri
	if u, err := url.Parse(uri); err == nil && u.Path != "" {
		name = u.Path
	}
	if mt := mime.TypeByExtension(path.Ext(name)); mt != "" {
		mt, _, _ = strings.Cut(mt, ";")
		return mt
	}
	if strings.HasPrefix(uri, "file://") {
		return "text/plain"
	}
	return "application/octet-stream"
}

func (a *API) prompt(w http.ResponseWriter, r *http.Request) *apiError {
	sid := r.PathValue("sessionID")
	var in promptBody
	if e := decode(r, &in, false); e != nil {
		return e
	}
	if in.ID != "" && !core.ValidID(core.PrefixMessage, in.ID) {
		return invalid("id: %q is not a message id (msg_…)", in.ID)
	}
	policy := core.PolicySteer
	switch in.Delivery {
	case "", "steer":
		in.Delivery = "steer"
	case "queue":
		policy = core.PolicyQueue
	default:
		return invalid("delivery: %q is not steer or queue", in.Delivery)
	}
	sess, err := a.st.Session(r.Context(), sid)
	if err != nil {
		return a.storeErr(err, sid)
	}
	head, _ := a.hub.Head()
	parts := in.Prompt.parts()
	noReply := in.Resume != nil && !*in.Resume
	forget, e := a.callback(r, sid, &in.ID, in.CallbackURL, noReply)
	if e != nil {
		return e
	}
	adm, err := a.eng.Prompt(r.Context(), sid, engine.PromptInput{MessageID: in.ID, Parts: parts, Agent: sess.Agent,
		Policy: policy, NoReply: noReply})
	if err != nil {
		forget()
		return a.storeErr(err, sid)
	}
	out := admittedJSON{ID: adm.MessageID, SessionID: sid, Delivery: in.Delivery,
		Prompt: promptJSON{Text: in.Prompt.Text, Files: in.Prompt.Files, Agents: in.Prompt.Agents}}
	if m, err := a.st.Message(r.Context(), sid, adm.MessageID); err == nil {
		// What was admitted: a retry's is the first admission's.
		out.TimeCreated = m.Info.Created
		if u, ok := userOf(m, nil).(userEntry); ok {
			out.Prompt = promptJSON{Text: u.Text, Files: u.Files, Agents: u.Agents}
		}
	}
	since := head
	if adm.Duplicate {
		since = 0
	}
	out.AdmittedSeq = a.admittedSeq(r.Context(), sid, adm.MessageID, since)
	data(w, out)
	return nil
}

// admittedSeq finds the seq of the log's record of a user message
// (message.updated) after since; 0 when it is not found in the pages it
// reads (a record pruned by retention).
func (a *API) admittedSeq(ctx context.Context, sid, msgID string, since int64) int64 {
	needle := []byte(`"id":"` + msgID + `"`)
	after := since
	for range 20 {
		evs, err := a.st.Events(ctx, store.EventQuery{After: after, SessionID: sid, Limit: 512})
		if err != nil || len(evs) == 0 {
			return 0
		}
		for _, ev := range evs {
			if ev.Type != core.EventMessageUpdated || !bytes.Contains(ev.Properties, needle) {
				continue
			}
			var p struct {
				Info struct {
					ID string `json:"id"`
				} `json:"info"`
			}
			if json.Unmarshal(ev.Properties, &p) == nil && p.Info.ID == msgID {
				return ev.Seq
			}
		}
		after = evs[len(evs)-1].Seq
	}
	return 0
}

// compact admits a compaction of the session (v1's summarize), answered
// once it is durable; its run summarizes the history.
func (a *API) compact(w http.ResponseWriter, r *http.Request) *apiError {
	sid := r.PathValue("sessionID")
	if _, err := a.eng.Prompt(r.Context(), sid, engine.PromptInput{Compact: true, Policy: core.PolicyQueue}); err != nil {
		return a.storeErr(err, sid)
	}
	noContent(w)
	return nil
}

// wait answers once the session is idle: no run left that has not ended.
func (a *API) wait(w http.ResponseWriter, r *http.Request) *apiError {
	sid := r.PathValue("sessionID")
	if _, err := a.eng.WaitIdle(r.Context(), sid, ""); err != nil {
		return a.storeErr(err, sid)
	}
	noContent(w)
	return nil
}

// interruptJSON is the answer of interrupt (opencode 2's later schema):
// whether a run was running and has been ended.
type interruptJSON struct {
	Interrupted bool `json:"interrupted"`
}

// interrupt ends the session's runs interrupted (reason user); a session
// that is idle is left as it is.
func (a *API) interrupt(w http.ResponseWriter, r *http.Request) *apiError {
	sid := r.PathValue("sessionID")
	ok, err := a.eng.Abort(r.Context(), sid)
	if err != nil {
		return a.storeErr(err, sid)
	}
	writeJSON(w, http.StatusOK, interruptJSON{Interrupted: ok})
	return nil
}
