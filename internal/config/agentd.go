package config

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
