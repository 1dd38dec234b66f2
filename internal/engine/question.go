package engine

import (
	"context"
	"errors"

	"github.com/agentd/agentd/internal/asks"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/tool"
)

// The question tool (asks.QuestionTool) lets the model ask the user
// questions with choices, as opencode's does. A question is durable like
// a permission request: the call is shown running with its input, marked
// as not started, while the run waits (busy, phase waiting_question); a restart keeps it asked;
// GET /question lists the pending ones and POST /question/{id}/reply or
// /reject answers. The answer becomes the call's result. It is offered
// only when the operator turns it on (Config.Questions): a headless client
// that never answers would leave the run waiting.

// ErrQuestionAnswered means a question was answered or dismissed before.
var ErrQuestionAnswered = errors.New("question was already answered")

// askQuestion records the call's questions as a durable request (or finds
// the one recorded before a restart), waits for the answer and returns the
// call's result.
func (r *runner) askQuestion(ctx context.Context, p *core.Part) (tool.Result, error) {
	questions, invalid := asks.Questions(p.State.Input)
	if invalid != nil {
		return *invalid, nil
	}
	e := r.e
	var q core.QuestionRequest
	err := r.tx(ctx, func(tx store.Tx) error {
		asked, err := tx.RunQuestions(ctx, r.run.ID)
		if err != nil {
			return err
		}
		for _, a := range asked {
			if a.PartID == p.ID {
				q = a
				return nil
			}
		}
		q = core.QuestionRequest{ID: core.NewID(core.PrefixQuestion, false), SessionID: p.SessionID, Questions: questions,
			Tool: &core.PermissionToolRef{MessageID: p.MessageID, CallID: p.CallID}, RunID: r.run.ID, PartID: p.ID}
		q.Time.Created = e.now()
		if err := tx.PutQuestion(ctx, q); err != nil {
			return err
		}
		return r.writeAsked(ctx, tx, p, core.PhaseWaitingQuestion, "question", core.EventQuestionAsked, q.Opencode())
	})
	if err != nil {
		return tool.Result{}, err
	}
	return r.awaitAnswer(ctx, q)
}

// awaitAnswer waits for the question's answer, or ends it as the asks'
// rule says when nobody answers in time.
func (r *runner) awaitAnswer(ctx context.Context, q core.QuestionRequest) (tool.Result, error) {
	e := r.e
	expired := r.askRule(ctx).Expired(q.Time.Created)
	for {
		changed := e.hub.Watch(r.run.SessionID)
		cur, err := e.st.Question(ctx, q.ID)
		if err != nil {
			return tool.Result{}, err
		}
		if !cur.Pending() {
			if run, err := e.st.Run(ctx, r.run.ID); err == nil {
				r.run = run
			}
			if cur.By != "" {
				// Nobody answered: the turn ends, as on a user's reject.
				return tool.Result{}, &rejectedError{res: tool.Errorf("Nobody answered these questions (" + cur.By + ").")}
			}
			return asks.QuestionResult(cur), nil
		}
		select {
		case <-ctx.Done():
			return tool.Result{}, ctx.Err()
		case <-changed:
		case <-expired:
			if err := r.expire(ctx, r.askRule(ctx).Question(), q.ID, e.dismiss); err != nil {
				return tool.Result{}, err
			}
		}
	}
}

// AnswerQuestion answers a pending question (answers: the chosen labels,
// one list per question), or dismisses it (reject). The run leaves the
// waiting_question phase in the same transaction.
func (e *Engine) AnswerQuestion(ctx context.Context, id string, answers [][]string, reject bool) error {
	return e.answerQuestion(ctx, id, answers, reject, "")
}

// dismiss dismisses a question nobody answered (by says who did).
func (e *Engine) dismiss(ctx context.Context, id, _, _, by string) error {
	return e.answerQuestion(ctx, id, nil, true, by)
}

// answerQuestion is AnswerQuestion recording who dismissed it when no
// person did (by).
func (e *Engine) answerQuestion(ctx context.Context, id string, answers [][]string, reject bool, by string) error {
	return e.st.Tx(ctx, func(tx store.Tx) error {
		q, err := tx.Question(ctx, id)
		if err != nil {
			return err
		}
		if !q.Pending() {
			return ErrQuestionAnswered
		}
		q.Time.Replied = e.now()
		w := writer{ctx: ctx, tx: tx}
		if reject {
			q.Rejected, q.By = true, by
			w.event(q.SessionID, core.EventQuestionRejected, map[string]string{"sessionID": q.SessionID, "requestID": q.ID})
		} else {
			if answers == nil {
				answers = [][]string{}
			}
			q.Answers = answers
			w.event(q.SessionID, core.EventQuestionReplied, map[string]any{"sessionID": q.SessionID, "requestID": q.ID, "answers": answers})
		}
		if err := tx.PutQuestion(ctx, q); err != nil {
			return err
		}
		run, err := tx.Run(ctx, q.RunID)
		if err == nil && !core.TerminalState(run.State) && run.Phase == core.PhaseWaitingQuestion {
			run.Phase = ""
			w.run(run)
			w.status(run.SessionID, core.StatusOf(&run, nil))
		}
		return w.err
	})
}

// closeQuestions dismisses the pending questions of a run that ends.
func closeQuestions(ctx context.Context, w *writer, tx store.Tx, run core.Run, by string, now int64) error {
	asked, err := tx.RunQuestions(ctx, run.ID)
	if err != nil {
		return err
	}
	for _, q := range asked {
		if !q.Pending() {
			continue
		}
		q.Rejected, q.By, q.Time.Replied = true, by, now
		if err := tx.PutQuestion(ctx, q); err != nil {
			return err
		}
		w.event(q.SessionID, core.EventQuestionRejected, map[string]string{"sessionID": q.SessionID, "requestID": q.ID})
	}
	return nil
}
