// Package budget caps what model calls may spend, per session and per API
// key. The engine asks Checker before each model call, with what the run
// has spent so far; the session's totals (and its key's) count the runs
// that ended, which the engine adds when each run ends. A call is made
// only while every figure spent is below its cap, so the run that crosses
// a cap ends at its next call (failed, reason budget_exceeded) with the
// figures in its error; a run whose last call crossed it has ended
// anyway, and the session's next run stops before its first call.
package budget

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// Checker checks a session's budget and its key's against the store.
type Checker struct {
	st store.Reader
}

// New returns a checker reading st.
func New(st store.Reader) *Checker { return &Checker{st: st} }

// Check returns the error a run ends with when the session, or the key it
// was made through, has spent its budget (nil while the run may call the
// model); run is what the running run has spent so far, which the
// session's totals do not hold yet. A session or key that no longer
// exists has no budget.
func (c *Checker) Check(ctx context.Context, sessionID string, run core.Spend) (*core.Error, error) {
	sess, err := c.st.Session(ctx, sessionID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("budget of session %s: %w", sessionID, err)
	}
	spent := Add(core.Spend{Tokens: sess.Tokens.Total(), Cost: sess.Cost}, run)
	if sess.Budget != nil {
		if e := over(*sess.Budget, spent); e != nil {
			e.Scope, e.Name = "session", sessionID
			return e.RunError(), nil
		}
	}
	if sess.Owner == "" {
		return nil, nil
	}
	k, err := c.st.APIKey(ctx, sess.Owner)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("budget of key %s: %w", sess.Owner, err)
	}
	if e := over(k.Budget, Add(k.Spent, run)); e != nil {
		e.Scope, e.Name, e.Key = "key", k.Name, k.ID
		return e.RunError(), nil
	}
	return nil, nil
}

// RunSpend is what a run's assistant messages spent; last, when set, is
// the freshest copy of one of them (the step that just ended).
func RunSpend(msgs []core.MessageWithParts, last *core.Message) core.Spend {
	var s core.Spend
	for _, m := range msgs {
		if m.Info.Role == core.RoleAssistant && (last == nil || m.Info.ID != last.ID) {
			s = Add(s, core.Spend{Tokens: m.Info.Tokens.Total(), Cost: m.Info.Cost})
		}
	}
	if last != nil {
		s = Add(s, core.Spend{Tokens: last.Tokens.Total(), Cost: last.Cost})
	}
	return s
}

// Add returns a + b.
func Add(a, b core.Spend) core.Spend {
	return core.Spend{Tokens: a.Tokens + b.Tokens, Cost: a.Cost + b.Cost}
}

// Exceeded is a budget that was spent: whose (a session's or a key's),
// which figure, the caps and what was spent.
type Exceeded struct {
	// Scope is "session" or "key"; Name the session's id or the key's
	// name, Key the key's id.
	Scope, Name, Key string
	// What is "tokens" or "cost".
	What  string
	Limit core.Budget
	Spent core.Spend
}

// over returns what b's caps say of spent: nil while it is below each.
func over(b core.Budget, spent core.Spend) *Exceeded {
	switch {
	case b.Tokens > 0 && spent.Tokens >= b.Tokens:
		return &Exceeded{What: "tokens", Limit: core.Budget{Tokens: b.Tokens, Cost: b.Cost}, Spent: spent}
	case b.Cost > 0 && spent.Cost >= b.Cost:
		return &Exceeded{What: "cost", Limit: core.Budget{Tokens: b.Tokens, Cost: b.Cost}, Spent: spent}
	}
	return nil
}

// Message says which budget was spent, with the figures.
func (e *Exceeded) Message() string {
	who := "session " + e.Name
	if e.Scope == "key" {
		who = fmt.Sprintf("API key %s (%s)", e.Name, e.Key)
	}
	if e.What == "tokens" {
		return fmt.Sprintf("budget exceeded: %s has spent %d tokens of its %d-token budget", who, e.Spent.Tokens, e.Limit.Tokens)
	}
	return fmt.Sprintf("budget exceeded: %s has spent $%.4f of its $%.4f budget", who, e.Spent.Cost, e.Limit.Cost)
}

// RunError is the run's error: opencode's UnknownError with ref
// budget_exceeded, the message, and the figures as fields a program
// reads (budget: session or key, key, exceeded: tokens or cost, limit,
// spent).
func (e *Exceeded) RunError() *core.Error {
	err := core.UnknownError(core.RefBudget, e.Message())
	x := err.Data.Extra
	x["budget"], x["exceeded"] = e.Scope, e.What
	x["limit"] = map[string]any{"tokens": e.Limit.Tokens, "cost": e.Limit.Cost}
	x["spent"] = map[string]any{"tokens": e.Spent.Tokens, "cost": e.Spent.Cost}
	if e.Key != "" {
		x["key"] = e.Key
	}
	return err
}

// Valid checks caps a client gives: neither negative nor beyond what a
// count can hold.
func Valid(b core.Budget) error {
	switch {
	case b.Tokens < 0:
		return errors.New("budget.tokens must not be negative")
	case b.Cost < 0 || math.IsNaN(b.Cost) || math.IsInf(b.Cost, 0):
		return errors.New("budget.cost must be a non-negative number of US dollars")
	}
	return nil
}

// Within reports whether the caps next allow no more than prev: each
// figure prev caps is capped in next too, at most as high. An API key may
// change its session's budget only so (the operator's caps bind it).
func Within(next, prev core.Budget) bool {
	if prev.Tokens > 0 && (next.Tokens <= 0 || next.Tokens > prev.Tokens) {
		return false
	}
	return prev.Cost <= 0 || next.Cost > 0 && next.Cost <= prev.Cost
}
