package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/core"
)

// Busy policies of a schedule: what a tick does when its session still
// has a run.
const (
	// BusySkip records the tick as skipped and sends nothing (the
	// default): a schedule never piles prompts onto a session that has
	// not finished the last one.
	BusySkip = "skip"
	// BusyQueue admits the prompt behind the running run (the prompt
	// busy policy queue).
	BusyQueue = "queue"
)

// Spec is what a client asks for: when, what, where. It is stored as
// sent (after Check) and read back at each tick.
type Spec struct {
	// Name is a label for people; optional.
	Name string `json:"name,omitempty"`
	// Cron is a five-field cron expression (or a macro such as @hourly),
	// read in Timezone; Every is an interval ("15m") counted from the
	// schedule's creation. Exactly one is set.
	Cron     string `json:"cron,omitempty"`
	Timezone string `json:"timezone,omitempty"`
	Every    string `json:"every,omitempty"`
	// Prompt is the text sent at each tick.
	Prompt string `json:"prompt" doc:"required"`
	// SessionID is the session that receives the prompt; NewSession
	// makes a new session (in Directory) at each tick instead. Exactly
	// one is set.
	SessionID  string `json:"sessionID,omitempty"`
	NewSession bool   `json:"newSession,omitempty"`
	Directory  string `json:"directory,omitempty"`
	// Agent and Model answer the prompt (empty: the session's or the
	// server's defaults, as for any prompt).
	Agent string         `json:"agent,omitempty"`
	Model *core.ModelRef `json:"model,omitempty"`
	// Busy is BusySkip (default) or BusyQueue.
	Busy string `json:"busy,omitempty"`
}

// Bounds of a spec.
const (
	MinEvery       = time.Second
	maxPromptBytes = 64 << 10
	maxNameBytes   = 256
)

// Check validates the spec and fills its defaults.
func (s *Spec) Check() error {
	if (s.Cron == "") == (s.Every == "") {
		return errors.New("give exactly one of cron and every")
	}
	if _, err := s.clock(); err != nil {
		return err
	}
	if strings.TrimSpace(s.Prompt) == "" {
		return errors.New("prompt: must not be empty")
	}
	if len(s.Prompt) > maxPromptBytes || len(s.Name) > maxNameBytes {
		return fmt.Errorf("prompt over %d bytes or name over %d", maxPromptBytes, maxNameBytes)
	}
	if (s.SessionID == "") == !s.NewSession {
		return errors.New(`give exactly one of sessionID and "newSession": true`)
	}
	if s.SessionID != "" && !core.ValidID(core.PrefixSession, s.SessionID) {
		return fmt.Errorf("sessionID: %q is not a session id", s.SessionID)
	}
	if s.Model != nil && (s.Model.ProviderID == "" || s.Model.ModelID == "") {
		return errors.New("model: providerID and modelID are both required")
	}
	switch s.Busy {
	case "":
		s.Busy = BusySkip
	case BusySkip, BusyQueue:
	default:
		return fmt.Errorf("busy: %q is not skip or queue", s.Busy)
	}
	return nil
}

// cadence tells the ticks of a spec.
type cadence struct {
	cron  Cron
	loc   *time.Location
	every time.Duration
}

// clock reads the spec's cadence.
func (s *Spec) clock() (cadence, error) {
	if s.Every != "" {
		if s.Timezone != "" {
			return cadence{}, errors.New("timezone: only with cron")
		}
		d, err := time.ParseDuration(s.Every)
		if err != nil {
			return cadence{}, fmt.Errorf("every: %w", err)
		}
		if d < MinEvery {
			return cadence{}, fmt.Errorf("every: at least %s", MinEvery)
		}
		return cadence{every: d}, nil
	}
	c, err := ParseCron(s.Cron)
	if err != nil {
		return cadence{}, err
	}
	loc := time.UTC
	if s.Timezone != "" {
		if loc, err = time.LoadLocation(s.Timezone); err != nil {
			return cadence{}, fmt.Errorf("timezone: %w", err)
		}
	}
	return cadence{cron: c, loc: loc}, nil
}

// after returns the first tick strictly after t (epoch ms); anchor is the
// schedule's creation, from which intervals count. 0 means never.
func (c cadence) after(anchor, t int64) int64 {
	if c.every > 0 {
		step := c.every.Milliseconds()
		if t < anchor {
			return anchor + step
		}
		return anchor + ((t-anchor)/step+1)*step
	}
	n := c.cron.Next(time.UnixMilli(t).In(c.loc))
	if n.IsZero() {
		return 0
	}
	return n.UnixMilli()
}

// missed counts the ticks after tick up to now, at most limit: the ticks
// a downtime (or a slow node) let pass, which are not fired.
func (c cadence) missed(anchor, tick, now int64, limit int) int {
	n := 0
	for t := c.after(anchor, tick); t != 0 && t <= now && n < limit; t = c.after(anchor, t) {
		n++
	}
	return n
}
