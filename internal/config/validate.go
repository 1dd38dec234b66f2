package config

import (
	"fmt"
	"strings"
	"time"
)

// Validate checks the numbers and durations of a configuration, naming
// the key of the first that cannot be meant: a negative step budget, a
// temperature out of range, a duration that does not parse.
func (f File) Validate() error {
	a := f.Agentd
	if a.MaxSteps < 0 || a.MaxSteps > 10000 {
		return fmt.Errorf("agentd.maxSteps %d: want 1 to 10000 (0 or absent: the default)", a.MaxSteps)
	}
	if r := a.Retry; r != nil {
		if r.MaxAttempts < 0 || r.MaxAttempts > 100 {
			return fmt.Errorf("agentd.retry.maxAttempts %d: want 0 to 100", r.MaxAttempts)
		}
		if err := positiveDuration("agentd.retry.maxElapsed", r.MaxElapsed); err != nil {
			return err
		}
	}
	if e := a.Events; e != nil {
		if e.MaxCount < 0 {
			return fmt.Errorf("agentd.events.maxCount %d: want a positive count", e.MaxCount)
		}
		if err := positiveDuration("agentd.events.maxAge", e.MaxAge); err != nil {
			return err
		}
	}
	if m := a.MCP; m != nil {
		switch m.Add {
		case "", "off", "remote":
		default:
			return fmt.Errorf("agentd.mcp.add %q: want remote or off (a client may never add a local server: it is a command)", m.Add)
		}
	}
	if err := a.Sandbox.validate(); err != nil {
		return err
	}
	if tm := a.Terminal; tm != nil {
		if tm.Max < 0 || tm.Max > 256 {
			return fmt.Errorf("agentd.terminal.max %d: want 1 to 256 (0 or absent: 16)", tm.Max)
		}
		if tm.Shell != "" && !strings.HasPrefix(tm.Shell, "/") {
			return fmt.Errorf("agentd.terminal.shell %q: want an absolute path", tm.Shell)
		}
	}
	if err := a.Plugins.validate(); err != nil {
		return err
	}
	for name, ag := range f.Agent {
		if ag.Steps < 0 || ag.MaxSteps < 0 {
			return fmt.Errorf("agent.%s.steps: want a positive count", name)
		}
		if t := ag.Temperature; t != nil && (*t < 0 || *t > 2) {
			return fmt.Errorf("agent.%s.temperature %g: want 0 to 2", name, *t)
		}
		if p := ag.TopP; p != nil && (*p < 0 || *p > 1) {
			return fmt.Errorf("agent.%s.top_p %g: want 0 to 1", name, *p)
		}
	}
	for pid, p := range f.Provider {
		for mid, m := range p.Models {
			if m.Limit.Context < 0 || m.Limit.Output < 0 {
				return fmt.Errorf("provider.%s.models.%s.limit: want positive token counts", pid, mid)
			}
			if c := m.Cost; c != nil && (c.Input < 0 || c.Output < 0 || c.CacheRead < 0 || c.CacheWrite < 0) {
				return fmt.Errorf("provider.%s.models.%s.cost: want prices of zero or more", pid, mid)
			}
			if md := m.Modalities; md != nil {
				for _, k := range append(append([]string{}, md.Input...), md.Output...) {
					if !modalityNames[k] {
						return fmt.Errorf("provider.%s.models.%s.modalities: %q: want text, audio, image, video or pdf", pid, mid, k)
					}
				}
			}
		}
	}
	return nil
}

func positiveDuration(key, v string) error {
	if v == "" {
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return fmt.Errorf("%s %q: want a positive duration such as \"10m\"", key, v)
	}
	return nil
}

// validate checks agentd.plugins' durations (nil: nothing set).
func (pl *Plugins) validate() error {
	if pl == nil {
		return nil
	}
	if err := positiveDuration("agentd.plugins.timeout", pl.Timeout); err != nil {
		return err
	}
	return positiveDuration("agentd.plugins.toolTimeout", pl.ToolTimeout)
}

// validate checks agentd.sandbox (nil: nothing set).
func (sb *Sandbox) validate() error {
	if sb == nil {
		return nil
	}
	switch sb.Mode {
	case "", "auto", "required", "off":
	default:
		return fmt.Errorf("agentd.sandbox.mode %q: want auto, required or off", sb.Mode)
	}
	for _, p := range append(append([]string{}, sb.Writable...), sb.Hidden...) {
		if !strings.HasPrefix(p, "/") && p != "~" && !strings.HasPrefix(p, "~/") {
			return fmt.Errorf("agentd.sandbox: %q: want an absolute path, or one from ~/", p)
		}
	}
	return nil
}
