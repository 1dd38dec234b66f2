// Package asks decides what becomes of an ask — a permission request or a
// question — that nobody answers. An operator gives asks a timeout and a
// policy for when it passes (agentd.asks in the configuration, per agent
// too): reject the ask (the turn ends as a user's reject ends it), end the
// run interrupted/ask_timeout, or, for a permission request whose patterns
// the operator listed, allow it once. A prompt sent with interactive false
// makes every ask of its run meet that policy at once.
//
// Timeouts count from the ask's creation time in the store, so that an
// ask cut off by a restart ends at once when it is overdue; the engine's
// runner, which owns the run (on PostgreSQL: holds its lease), is the one
// that ends it.
package asks

import (
	"fmt"
	"time"

	"github.com/agentd/agentd/internal/clock"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/permission"
)

// Action is what becomes of an ask nobody answered in time.
type Action string

// Actions.
const (
	// Reject answers the ask reject: the call fails and the turn ends
	// (interrupted, reason rejected), as when a user rejects.
	Reject Action = "reject"
	// Interrupt ends the run interrupted with reason ask_timeout.
	Interrupt Action = "interrupt"
)

// Who answered an ask when no one did, as the request records it (By).
const (
	// ByTimeout: the ask's timeout passed.
	ByTimeout = "timeout"
	// ByRules: the run was not interactive; the rules answered at once.
	ByRules = "rules"
)

// Settings are the rules for asks of the server or of one agent.
type Settings struct {
	// Timeout is how long an ask waits for an answer; 0 means for ever.
	Timeout time.Duration
	// OnTimeout is what happens then; "" means Reject.
	OnTimeout Action
	// Allow lists, per permission, the patterns a request may have for a
	// timeout to allow it once instead (every pattern of the request must
	// match one).
	Allow map[string][]string
}

// Policy is the server's settings for asks, with the agents' own.
type Policy struct {
	Settings
	// Agents holds the agents whose settings differ, whole.
	Agents map[string]Settings
	// Clock measures the timeouts (nil: the system's).
	Clock clock.Clock
}

// Rule is what applies to the asks of one run.
type Rule struct {
	Settings
	// Interactive false ends every ask at once.
	Interactive bool
	clock       clock.Clock
}

// For returns the rule for a run of the agent; interactive is false for a
// run whose prompt said so.
func (p *Policy) For(agent string, interactive bool) Rule {
	s := p.Settings
	if a, ok := p.Agents[agent]; ok {
		s = a
	}
	return Rule{Settings: s, Interactive: interactive, clock: clock.Or(p.Clock)}
}

// Expired returns a channel that receives when an ask created at created
// (epoch ms) has waited its time: at once for a run that is not
// interactive, never (nil) when the rule sets no timeout.
func (r Rule) Expired(created int64) <-chan time.Time {
	if r.clock == nil {
		r.clock = clock.Real{}
	}
	if !r.Interactive {
		return r.clock.After(0)
	}
	if r.Timeout <= 0 {
		return nil
	}
	return r.clock.After(time.UnixMilli(created).Add(r.Timeout).Sub(r.clock.Now()))
}

// Decision is how an ask nobody answered ends.
type Decision struct {
	// Interrupt ends the run interrupted/ask_timeout; otherwise the ask
	// is answered Reply ("once" or "reject").
	Interrupt bool
	Reply     string
	// By is who answered (ByTimeout, ByRules).
	By string
}

// Permission decides a permission request nobody answered: once when the
// operator listed all its patterns, else the rule's action.
func (r Rule) Permission(perm string, patterns []string) Decision {
	d := r.Question()
	if allowed(r.Allow[perm], patterns) {
		d.Interrupt, d.Reply = false, core.ReplyOnce
	}
	return d
}

// Question decides a question nobody answered: the rule's action.
func (r Rule) Question() Decision {
	d := Decision{Interrupt: r.OnTimeout == Interrupt, Reply: core.ReplyReject, By: ByTimeout}
	if !r.Interactive {
		d.By = ByRules
	}
	return d
}

// allowed reports whether every pattern matches one of the listed ones.
func allowed(list, patterns []string) bool {
	if len(list) == 0 || len(patterns) == 0 {
		return false
	}
	for _, p := range patterns {
		ok := false
		for _, l := range list {
			ok = ok || permission.Match(l, p)
		}
		if !ok {
			return false
		}
	}
	return true
}

// Valid reports whether a is an action.
func (a Action) Valid() bool { return a == "" || a == Reject || a == Interrupt }

// EndedBy is who ended the asks still open when a run ends for reason:
// for ask_timeout, ByRules in a run that was not interactive and
// ByTimeout otherwise; "" (the run's end) for other reasons.
func EndedBy(run core.Run, reason core.EndReason) string {
	switch {
	case reason != core.ReasonAskTimeout:
		return ""
	case run.Interactive != nil && !*run.Interactive:
		return ByRules
	default:
		return ByTimeout
	}
}

// Interactive reports whether a run asks people (its prompt did not say
// interactive false).
func Interactive(run core.Run) bool { return run.Interactive == nil || *run.Interactive }

// CheckSession checks a session's own settings (PATCH /session/{id}).
func CheckSession(s core.SessionAsks) error {
	if s.Timeout != "" {
		if d, err := time.ParseDuration(s.Timeout); err != nil || d < 0 {
			return fmt.Errorf("asks.timeout %q: want a duration such as \"2m\" (\"0\": no timeout)", s.Timeout)
		}
	}
	if a := Action(s.OnTimeout); !a.Valid() {
		return fmt.Errorf("asks.onTimeout %q: want reject or interrupt", s.OnTimeout)
	}
	return nil
}

// ForSession returns the rule for a run of the agent in sess: the
// session's own keys over the agent's (or the server's) settings.
func (p *Policy) ForSession(sess core.Session, agent string, interactive bool) Rule {
	r := p.For(agent, interactive)
	if sess.Asks == nil {
		return r
	}
	if d, err := time.ParseDuration(sess.Asks.Timeout); err == nil && d >= 0 {
		r.Timeout = d
	}
	if a := Action(sess.Asks.OnTimeout); a != "" && a.Valid() {
		r.OnTimeout = a
	}
	return r
}
