package config

import "fmt"

// The agentd block's settings that only the operator's files may set
// (terminals, the sandbox) and where snapshots are kept.

// Terminal is agentd.terminal. Enabled turns terminals on (a terminal is
// a shell for whoever can reach the API, confined by the sandbox as the
// model's commands are); Shell is the program a terminal runs when the
// client names none (an absolute path; default the server's $SHELL, else
// bash, else sh); Max bounds the terminals kept at once (default 16).
type Terminal struct {
	Enabled bool   `json:"enabled"`
	Shell   string `json:"shell"`
	Max     int    `json:"max"`
}

// SnapshotSettings place the snapshot stores: Dir (an absolute path) is
// the folder that holds them, one git directory per workspace (default:
// beside a SQLite database; under the user's data directory for a shared
// PostgreSQL one, which the nodes of one machine share). Nodes on several
// machines that serve one workspace name a folder they share.
type SnapshotSettings struct {
	Dir string `json:"dir"`
}

// Sandbox is agentd.sandbox. Mode is "auto" (the default: Landlock where
// the kernel has it, a warning where not), "required" (no start without
// it) or "off"; Network false denies commands TCP; Writable and Hidden
// are absolute paths (or from ~/) every command may change, or may not
// read.
type Sandbox struct {
	Mode     string   `json:"mode"`
	Network  *bool    `json:"network"`
	Writable []string `json:"writable"`
	Hidden   []string `json:"hidden"`
}

// Asks is agentd.asks: how long an ask (a permission request, a question)
// waits for an answer, and what becomes of it when nobody answers (see
// internal/asks). Timeout is a Go duration ("2m"; absent or "0": for
// ever); OnTimeout is "reject" (the default: the turn ends as on a user's
// reject) or "interrupt" (the run ends interrupted/ask_timeout); Allow
// lists, per permission, patterns whose requests a timeout allows once
// instead; Agent holds the agents whose settings differ, each key given
// replacing the server's. Only the operator's files set it: an allow list
// widens what the model may do.
type Asks struct {
	Timeout   string               `json:"timeout"`
	OnTimeout string               `json:"onTimeout"`
	Allow     map[string][]string  `json:"allow"`
	Agent     map[string]AgentAsks `json:"agent"`
}

// AgentAsks are one agent's keys of agentd.asks.
type AgentAsks struct {
	Timeout   *string             `json:"timeout"`
	OnTimeout string              `json:"onTimeout"`
	Allow     map[string][]string `json:"allow"`
}

// Resume is agentd.resume: what a start does with the runs a restart cut
// off. true (the default) resumes them, false ends them
// interrupted/server_restart, "paused" keeps them waiting for an explicit
// resume (see internal/pause).
type Resume string

// The values of agentd.resume.
const (
	ResumeOn     Resume = "true"
	ResumeOff    Resume = "false"
	ResumePaused Resume = "paused"
)

// UnmarshalJSON reads true, false or "paused".
func (r *Resume) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case "true":
		*r = ResumeOn
	case "false":
		*r = ResumeOff
	case `"paused"`:
		*r = ResumePaused
	default:
		return fmt.Errorf("resume: want true, false or \"paused\", not %s", b)
	}
	return nil
}

// ParseResume reads the --resume flag's value: true, false or paused.
func ParseResume(s string) (Resume, error) {
	switch r := Resume(s); r {
	case ResumeOn, ResumeOff, ResumePaused:
		return r, nil
	}
	return "", fmt.Errorf("resume: want true, false or paused, not %q", s)
}

// Plugins is agentd.plugins. Dir is the plugin folder (npm packages are
// installed in its node_modules; default: "plugins" beside a SQLite
// database); Bun the Bun binary (default: the folder's, else bun on
// PATH); Timeout bounds each awaited hook (a Go duration, default "10s")
// and ToolTimeout each call of a plugin's tool (default "10m"); Workspace
// loads plugins a project adds (the project's agentd.json "plugin" key,
// its .opencode/plugin and .opencode/plugins files), which the model can
// write, and is off; Env names variables (or patterns) of the server's
// environment the host gets besides the tools' allow-list.
type Plugins struct {
	Dir         string   `json:"dir"`
	Bun         string   `json:"bun"`
	Timeout     string   `json:"timeout"`
	ToolTimeout string   `json:"toolTimeout"`
	Workspace   bool     `json:"workspace"`
	Env         []string `json:"env"`
}

// Webhooks is agentd.webhooks (package webhook). Secret signs every
// delivery (at least 16 characters; give it as {env:VAR} to keep it out
// of the file); without it webhooks are off. Allow opens addresses the
// delivery's address check refuses (this machine, private networks), as
// agentd.webfetch.allow does for the model's fetches, and apart from it:
// opening one is not opening the other. RetryFor bounds how long a
// delivery is retried (default "24h"), Timeout one attempt (default
// "10s"). Only the operator's files set it, as the sandbox.
type Webhooks struct {
	Secret   string   `json:"secret"`
	Allow    []string `json:"allow"`
	RetryFor string   `json:"retryFor"`
	Timeout  string   `json:"timeout"`
}
