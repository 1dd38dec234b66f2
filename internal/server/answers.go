package server

// The answers of the routes whose shape is the server's own, named so
// that the API document (openapi.go) describes exactly what is written.

// healthJSON is GET /global/health's answer; Error is set, with 503,
// when the node cannot keep what it is given.
type healthJSON struct {
	Healthy bool   `json:"healthy"`
	Version string `json:"version"`
	Error   string `json:"error,omitempty"`
}

// nodeJSON is GET /node's answer.
type nodeJSON struct {
	Node     string `json:"node"`
	Database string `json:"database"`
	Leases   int    `json:"leases"`
	Version  string `json:"version"`
	// Sandbox says what confines the commands run for the model, as the
	// start-up log does.
	Sandbox string `json:"sandbox"`
	// Cluster is every node connected to a shared database, this one
	// included; absent on SQLite.
	Cluster []ClusterNode `json:"cluster,omitempty"`
}

// configProvidersJSON is GET /config/providers' answer.
type configProvidersJSON struct {
	Providers []providerJSON    `json:"providers"`
	Default   map[string]string `json:"default"`
}

// providerListJSON is GET /provider's answer.
type providerListJSON struct {
	All       []providerJSON    `json:"all"`
	Default   map[string]string `json:"default"`
	Connected []string          `json:"connected"`
}

// pathJSON is GET /path's answer.
type pathJSON struct {
	Home      string `json:"home"`
	State     string `json:"state"`
	Config    string `json:"config"`
	Worktree  string `json:"worktree"`
	Directory string `json:"directory"`
}

// projectJSON is GET /project/current's answer: opencode's "global"
// project, named for its git repository when there is one.
type projectJSON struct {
	ID        string      `json:"id"`
	Worktree  string      `json:"worktree"`
	VCS       string      `json:"vcs,omitempty"`
	Name      string      `json:"name,omitempty"`
	Sandboxes []string    `json:"sandboxes"`
	Time      projectTime `json:"time"`
}

type projectTime struct {
	Created int64 `json:"created"`
	Updated int64 `json:"updated"`
}

// vcsJSON is GET /vcs's answer.
type vcsJSON struct {
	Branch        string `json:"branch,omitempty"`
	DefaultBranch string `json:"default_branch,omitempty"`
}

// consoleJSON is GET /experimental/console's answer.
type consoleJSON struct {
	ConsoleManagedProviders []string `json:"consoleManagedProviders"`
	SwitchableOrgCount      int      `json:"switchableOrgCount"`
}
