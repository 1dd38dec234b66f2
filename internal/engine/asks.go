package engine

import (
	"context"
	"errors"

	"github.com/agentd/agentd/internal/asks"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/tool"
)

// askRule is the rule for the asks of this run (package asks): the
// session's own settings over its agent's and the server's.
func (r *runner) askRule(ctx context.Context) asks.Rule {
	sess, _ := r.e.st.Session(ctx, r.run.SessionID) // unreadable: the agent's rule
	return r.e.cfg.Asks.ForSession(sess, r.agent.Name, asks.Interactive(r.run))
}

// expire ends an ask nobody answered in time as d says. An answer is
// recorded like a person's (answer: reply or dismiss), and the waiting
// loop then finds it; an interruption ends the run at the ask's call.
func (r *runner) expire(ctx context.Context, d asks.Decision, id string, answer func(ctx context.Context, id, reply, message, by string) error) error {
	if d.Interrupt {
		return &rejectedError{res: tool.Errorf("Nobody answered in time (" + d.By + "): the run ends here."), reason: core.ReasonAskTimeout}
	}
	err := answer(ctx, id, d.Reply, "", d.By)
	if errors.Is(err, ErrAlreadyAnswered) || errors.Is(err, ErrQuestionAnswered) {
		return nil // a person answered first
	}
	return err
}

// rejectedAsk is a rejected request's outcome: a person's reject, or the
// reject of one nobody answered (By), which the call's error says.
func rejectedAsk(req core.PermissionRequest) (*tool.Result, error) {
	if req.By == "" {
		return rejected(req.Message)
	}
	return nil, &rejectedError{res: tool.Errorf("Nobody answered the permission request (" + req.By + "): the call is rejected and the turn ends here.")}
}
