package app

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/agentd/agentd/internal/asks"
	"github.com/agentd/agentd/internal/config"
)

// asksFrom reads agentd.asks from the operator's files (the global one,
// --config); the project's is refused with a warning, as its allow list
// would let the model widen its own permissions.
func asksFrom(s Setup, loaded *config.Loaded) (asks.Policy, error) {
	project := ""
	if s.Workspace != "" {
		project = filepath.Join(s.Workspace, "agentd.json")
	}
	var a *config.Asks
	for i, f := range loaded.Files {
		if f.Agentd.Asks == nil {
			continue
		}
		if loaded.Used[i] == project && !sameFile(project, s.ConfigFile) {
			loaded.Warnings = append(loaded.Warnings, config.Problem{File: project, Key: "agentd.asks",
				Msg: "only the operator's files (the global agentd.json, --config) set how asks end, not the project's"})
			continue
		}
		a = f.Agentd.Asks
	}
	return asksPolicy(a)
}

// asksPolicy turns agentd.asks into the engine's policy: each agent's
// settings are the server's with the keys the agent gives replaced.
func asksPolicy(a *config.Asks) (asks.Policy, error) {
	var p asks.Policy
	if a == nil {
		return p, nil
	}
	var err error
	if p.Settings, err = askSettings("agentd.asks", a.Timeout, a.OnTimeout, a.Allow, asks.Settings{}); err != nil {
		return p, err
	}
	for name, ag := range a.Agent {
		timeout := a.Timeout
		if ag.Timeout != nil {
			timeout = *ag.Timeout
		}
		s, err := askSettings("agentd.asks.agent."+name, timeout, ag.OnTimeout, ag.Allow, p.Settings)
		if err != nil {
			return p, err
		}
		if p.Agents == nil {
			p.Agents = map[string]asks.Settings{}
		}
		p.Agents[name] = s
	}
	return p, nil
}

// askSettings checks one level of agentd.asks; keys left empty keep
// base's.
func askSettings(key, timeout, onTimeout string, allow map[string][]string, base asks.Settings) (asks.Settings, error) {
	s := base
	s.Timeout = 0
	if timeout != "" {
		d, err := time.ParseDuration(timeout)
		if err != nil || d < 0 {
			return s, fmt.Errorf("%s.timeout %q: want a duration such as \"2m\" (\"0\": no timeout)", key, timeout)
		}
		s.Timeout = d
	}
	if onTimeout != "" {
		if a := asks.Action(onTimeout); !a.Valid() {
			return s, fmt.Errorf("%s.onTimeout %q: want reject or interrupt", key, onTimeout)
		}
		s.OnTimeout = asks.Action(onTimeout)
	}
	if allow != nil {
		s.Allow = allow
	}
	return s, nil
}
