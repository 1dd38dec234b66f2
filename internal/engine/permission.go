package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/permission"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/tool"
)

// waitingKey is the key, in a running tool call's metadata, of agentd's
// mark that the call has not started: it is shown running (with its
// input) while it waits for a permission.
const waitingKey = "agentd"

// notStarted reports whether a tool call has provably not executed: it is
// pending, or shown running while it waits for a permission. The running
// state written when it starts executing carries no such mark.
func notStarted(p core.Part) bool {
	if p.Type != core.PartTool {
		return false
	}
	if p.State.Status == core.ToolPending {
		return true
	}
	if p.State.Status != core.ToolRunning {
		return false
	}
	m, ok := p.State.Metadata[waitingKey].(map[string]any)
	return ok && m["waiting"] != nil
}

// ErrAlreadyAnswered means a permission request was answered before.
var ErrAlreadyAnswered = errors.New("permission request was already answered")

// doomLoopRepeats is how many identical calls in a row trigger the
// doom_loop permission.
const doomLoopRepeats = 3

// operatorRules are a run's rules from the operator's side, later ones
// winning: the defaults, the configuration's, the agent's.
func (r *runner) operatorRules() []core.Rule {
	rules := append(permission.Defaults(), r.e.cfg.Permission...)
	return append(rules, r.agent.Permission...)
}

// denies reports, for a tool that lists what it offers (tool.Contextual),
// whether the session's rules deny a permission's pattern outright.
func (r *runner) denies(sess core.Session) func(perm, pattern string) bool {
	return func(perm, pattern string) bool {
		return permission.Decide(r.operatorRules(), sess.Permission, sess.Granted, perm, pattern) == core.ActionDeny
	}
}

// authorize decides whether a tool call may run. It returns a result for
// the model when it may not (denied, rejected), and an error when the run
// must stop (cancelled, store failure).
func (r *runner) authorize(ctx context.Context, sess core.Session, p *core.Part, t tool.Tool, call *tool.Call) (*tool.Result, error) {
	var needs []tool.Need
	if pt, ok := t.(tool.Permissioned); ok {
		needs = pt.Needs(*call)
	}
	key := p.Tool + "\x00" + string(p.State.Input)
	r.recent = append(r.recent, key)
	if n := len(r.recent); n >= doomLoopRepeats {
		same := true
		for _, k := range r.recent[n-doomLoopRepeats:] {
			same = same && k == key
		}
		if same {
			needs = append([]tool.Need{{Permission: "doom_loop", Patterns: []string{p.Tool}, Always: []string{p.Tool},
				Title:    fmt.Sprintf("%s called %d times in a row with the same input", p.Tool, doomLoopRepeats),
				Metadata: map[string]any{"tool": p.Tool, "input": string(p.State.Input)}}}, needs...)
		}
	}
	for _, need := range needs {
		action, err := r.e.cfg.Hooks.Permission(ctx, sess.Directory, *p, need, need.Decide(r.operatorRules(), sess.Permission, sess.Granted))
		if err != nil {
			res := tool.Errorf(err.Error())
			return &res, nil
		}
		switch action {
		case core.ActionDeny:
			res := tool.Errorf(fmt.Sprintf("permission denied by rule: %s %s", need.Permission, strings.Join(need.Patterns, ", ")))
			return &res, nil
		case core.ActionAsk:
			req, err := r.ask(ctx, p, need)
			if err != nil {
				return nil, err
			}
			if req.Reply == core.ReplyReject {
				return rejectedAsk(req)
			}
			// An "always" reply changed the session's rules.
			if s, err := r.e.st.Session(ctx, sess.ID); err == nil {
				sess = s
			}
		}
		if need.Permission == "external_directory" {
			call.AllowExternal = true
		}
	}
	return nil, nil
}

// askFor is a tool's own ask while it runs (a plugin tool's
// context.ask): the rules decide, and an ask is the call's durable
// request like those asked before it ran.
func (r *runner) askFor(sess core.Session, p *core.Part) func(context.Context, tool.Need) error {
	return func(ctx context.Context, need tool.Need) error {
		switch need.Decide(r.operatorRules(), sess.Permission, sess.Granted) {
		case core.ActionDeny:
			return fmt.Errorf("permission denied by rule: %s %s", need.Permission, strings.Join(need.Patterns, ", "))
		case core.ActionAsk:
			req, err := r.ask(ctx, p, need)
			if err == nil && req.Reply == core.ReplyReject {
				err = errors.New("The user rejected permission to use this specific tool call. " + req.Message)
			}
			return err
		}
		return nil
	}
}

// rejectedError is a permission the user rejected without a message: the
// call fails with res, and the run ends there (interrupted, rejected), as
// opencode stops the turn on its RejectedError.
type rejectedError struct {
	res tool.Result
	// reason is the run's end reason: rejected unless set.
	reason core.EndReason
}

func (e *rejectedError) Error() string { return e.res.Output }

// rejected is the outcome of a rejected permission, in opencode's words:
// with the user's message the model gets it and goes on (opencode's
// CorrectedError); without one the turn ends (RejectedError).
func rejected(message string) (*tool.Result, error) {
	if message != "" {
		res := tool.Errorf("The user rejected permission to use this specific tool call with the following feedback: " + message)
		return &res, nil
	}
	return nil, &rejectedError{res: tool.Errorf("The user rejected permission to use this specific tool call.")}
}

// writeAsked records in tx that the run waits for an ask (what: the
// "waiting" of the call's metadata) and the ask's event.
func (r *runner) writeAsked(ctx context.Context, tx store.Tx, p *core.Part, phase core.Phase, what, event string, ask any) error {
	run, err := tx.Run(ctx, r.run.ID)
	if err != nil {
		return err
	}
	run.Phase = phase
	w := writer{ctx: ctx, tx: tx}
	if p.State.Status == core.ToolPending {
		// Clients show a call's input from its running state, and
		// opencode's ask dialogs look for it there: the call is shown
		// running, marked as not started, before the ask.
		waiting := *p
		waiting.State = core.ToolState{Status: core.ToolRunning, Input: p.State.Input, Time: core.PartTime{Start: r.e.now()},
			Metadata: map[string]any{waitingKey: map[string]any{"waiting": what}}}
		w.part(waiting)
		if w.err == nil {
			*p = waiting
		}
	}
	w.event(p.SessionID, event, ask)
	w.run(run)
	w.status(run.SessionID, core.StatusOf(&run, nil))
	if w.err == nil {
		r.run = run
	}
	return w.err
}

// askMetadata is a request's metadata: the need's, and its Detail,
// computed here, outside any transaction.
func askMetadata(need tool.Need) map[string]any {
	md := map[string]any{}
	for k, v := range need.Metadata {
		md[k] = v
	}
	if need.Detail != nil {
		for k, v := range need.Detail() {
			md[k] = v
		}
	}
	return md
}

// ask records a durable permission request (or finds the one recorded
// before a restart) and waits for its reply.
func (r *runner) ask(ctx context.Context, p *core.Part, need tool.Need) (core.PermissionRequest, error) {
	e := r.e
	var req core.PermissionRequest
	md := askMetadata(need)
	err := r.tx(ctx, func(tx store.Tx) error {
		// The question may have been asked (and even answered) before a
		// restart; it is asked once per call.
		asked, err := tx.RunPermissions(ctx, r.run.ID)
		if err != nil {
			return err
		}
		for _, q := range asked {
			if q.PartID == p.ID && q.Permission == need.Permission {
				req = q
				return nil
			}
		}
		req = core.PermissionRequest{ID: core.NewID(core.PrefixPermission, false), SessionID: p.SessionID,
			Permission: need.Permission, Patterns: need.Patterns, Always: need.Always, Metadata: md,
			Tool: &core.PermissionToolRef{MessageID: p.MessageID, CallID: p.CallID}, RunID: r.run.ID, PartID: p.ID, Title: need.Title}
		if req.Always == nil {
			req.Always = []string{}
		}
		req.Time.Created = e.now()
		if err := tx.PutPermission(ctx, req); err != nil {
			return err
		}
		return r.writeAsked(ctx, tx, p, core.PhaseWaitingPermission, "permission", core.EventPermissionAsked, req.Opencode())
	})
	if err != nil {
		return req, err
	}
	return r.awaitReply(ctx, req)
}

// awaitReply waits for the request's reply, or ends it as the asks' rule
// says when nobody answers in time.
func (r *runner) awaitReply(ctx context.Context, req core.PermissionRequest) (core.PermissionRequest, error) {
	e := r.e
	expired := r.askRule(ctx).Expired(req.Time.Created)
	for {
		changed := e.hub.Watch(r.run.SessionID)
		cur, err := e.st.Permission(ctx, req.ID)
		if err != nil {
			return req, err
		}
		if cur.Reply != "" {
			run, err := e.st.Run(ctx, r.run.ID)
			if err != nil {
				return cur, err
			}
			r.run = run
			return cur, nil
		}
		select {
		case <-ctx.Done():
			return cur, ctx.Err()
		case <-changed:
		case <-expired:
			if err := r.expire(ctx, r.askRule(ctx).Permission(req.Permission, req.Patterns), req.ID, e.reply); err != nil {
				return cur, err
			}
		}
	}
}

// Reply answers a pending permission request: once, always (which also
// adds an allow rule for the request's "always" patterns to the session),
// or reject. The run leaves the waiting_permission phase in the same
// transaction.
func (e *Engine) Reply(ctx context.Context, id, reply, message string) error {
	return e.reply(ctx, id, reply, message, "")
}

// reply is Reply recording who answered when no person did (by).
func (e *Engine) reply(ctx context.Context, id, reply, message, by string) error {
	if reply != core.ReplyOnce && reply != core.ReplyAlways && reply != core.ReplyReject {
		return &InputError{fmt.Sprintf("reply: %q is not once, always or reject", reply)}
	}
	return e.st.Tx(ctx, func(tx store.Tx) error {
		req, err := tx.Permission(ctx, id)
		if err != nil {
			return err
		}
		if req.Reply != "" {
			return ErrAlreadyAnswered
		}
		req.Reply, req.Message, req.By = reply, message, by
		req.Time.Replied = e.now()
		if err := tx.PutPermission(ctx, req); err != nil {
			return err
		}
		w := writer{ctx: ctx, tx: tx}
		w.event(req.SessionID, core.EventPermissionReplied, core.PermissionRepliedProps{SessionID: req.SessionID, RequestID: req.ID, Reply: reply})
		if reply == core.ReplyAlways {
			sess, err := tx.Session(ctx, req.SessionID)
			if err != nil {
				return err
			}
			for _, pat := range req.Always {
				sess.Granted = append(sess.Granted, core.Rule{Permission: req.Permission, Pattern: pat, Action: core.ActionAllow})
			}
			sess.Time.Updated = e.now()
			w.session(sess)
		}
		run, err := tx.Run(ctx, req.RunID)
		if err == nil && !core.TerminalState(run.State) && run.Phase == core.PhaseWaitingPermission {
			others, err := tx.PendingPermissions(ctx, req.SessionID)
			if err != nil {
				return err
			}
			still := false
			for _, o := range others {
				still = still || o.RunID == run.ID
			}
			if !still {
				run.Phase = ""
				w.run(run)
				w.status(run.SessionID, core.StatusOf(&run, nil))
			}
		}
		return w.err
	})
}

// closePermissions rejects the pending requests of a run that ends.
func closePermissions(ctx context.Context, w *writer, tx store.Tx, run core.Run, state core.RunState, by string, now int64) error {
	pending, err := tx.PendingPermissions(ctx, run.SessionID)
	if err != nil {
		return err
	}
	for _, q := range pending {
		if q.RunID != run.ID {
			continue
		}
		q.Reply, q.Message, q.By = core.ReplyReject, "run ended: "+string(state), by
		q.Time.Replied = now
		if err := tx.PutPermission(ctx, q); err != nil {
			return err
		}
		w.event(q.SessionID, core.EventPermissionReplied, core.PermissionRepliedProps{SessionID: q.SessionID, RequestID: q.ID, Reply: core.ReplyReject})
	}
	return nil
}

// Denied reports whether the operator's rules (the defaults and the
// configuration's) deny permission for pattern: what the API reads for
// clients (a file's content) follows the rules the tools do.
func (e *Engine) Denied(perm, pattern string) bool {
	rules := append(permission.Defaults(), e.cfg.Permission...)
	return permission.Evaluate(rules, perm, pattern) == core.ActionDeny
}
