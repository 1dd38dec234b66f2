package app

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/credential"
	"github.com/agentd/agentd/internal/sandbox"
)

// sandboxFrom returns the sandbox the operator's files ask for: every file
// read but the project's agentd.json (the workspace's, which the model
// can write), whose agentd.sandbox is reported ignored.
func sandboxFrom(s Setup, loaded *config.Loaded) sandbox.Config {
	project := ""
	if s.Workspace != "" {
		project = filepath.Join(s.Workspace, "agentd.json")
	}
	var sb *config.Sandbox
	for i, f := range loaded.Files {
		if f.Agentd.Sandbox == nil {
			continue
		}
		if loaded.Used[i] == project && !sameFile(project, s.ConfigFile) {
			loaded.Warnings = append(loaded.Warnings, config.Problem{File: project, Key: "agentd.sandbox",
				Msg: "only the operator's files (the global agentd.json, --config) set the sandbox, not the project's"})
			continue
		}
		sb = f.Agentd.Sandbox
	}
	if sb == nil {
		return sandbox.Config{}
	}
	return sandbox.Config{Mode: sandbox.Mode(sb.Mode), DenyNetwork: sb.Network != nil && !*sb.Network,
		Writable: sb.Writable, Hidden: sb.Hidden}
}

func sameFile(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	sa, err := os.Stat(a)
	if err != nil {
		return false
	}
	sb, err := os.Stat(b)
	return err == nil && os.SameFile(sa, sb)
}

// startSandbox builds the sandbox of the node's commands and says at start
// what confines them. Hidden from them, besides the operator's list: the
// database, its companions and its directory, the saved tool output of
// every session (each call is granted its own session's), agentd's
// configuration directory and every configuration file read (but the
// project's own, which is the workspace's), the snapshot stores, the
// credential file and the TLS key.
func startSandbox(cfg Config) (*sandbox.Sandbox, string, error) {
	sc := cfg.Sandbox
	sc.Hidden = append(serverPaths(cfg), sc.Hidden...)
	sb, err := sandbox.New(sc)
	if err != nil {
		return nil, "", err
	}
	log := cfg.Logger
	switch {
	case sb != nil:
		log.Info("sandbox: " + sb.String() + "; commands write only in their workspace and temporary directory")
		for _, m := range sb.Missing() {
			log.Warn("sandbox: this kernel's Landlock is old: " + m)
		}
		for _, o := range sb.Overlaps(cfg.Directory) {
			log.Warn("sandbox: " + o)
		}
		return sb, sb.String(), nil
	case sc.Mode == sandbox.ModeOff:
		log.Warn("sandbox: off (agentd.sandbox.mode): commands run for the model are held by the permission rules alone")
		return nil, "off", nil
	}
	reason := sandbox.Reason()
	log.Warn(fmt.Sprintf("sandbox: UNAVAILABLE, commands run for the model are NOT confined: %v. "+
		"Set agentd.sandbox.mode to \"required\" to refuse to start without it, or to \"off\" to say it is meant", reason))
	return nil, "unavailable: commands run unconfined", nil
}

// serverPaths are the server's own files that commands must not read.
func serverPaths(cfg Config) []string {
	var out []string
	if !IsPostgres(cfg.DBPath) && cfg.DBPath != "" {
		db, _ := filepath.Abs(cfg.DBPath)
		out = append(out, filepath.Dir(db), db, db+"-wal", db+"-shm", db+"-journal", db+".lock")
	}
	if cfg.Engine.OutputDir != "" {
		out = append(out, cfg.Engine.OutputDir)
	}
	// The snapshot stores: a command that could write their objects or
	// read other workspaces' files would reach around revert and the
	// read rules.
	if root := cfg.Engine.Snapshots.Root(); root != "" {
		out = append(out, root)
	}
	if cfg.Engine.GlobalDir != "" {
		out = append(out, cfg.Engine.GlobalDir)
	}
	for _, f := range cfg.ConfigFiles {
		abs, err := filepath.Abs(f)
		if err != nil || cfg.Directory != "" && filepath.Dir(abs) == filepath.Clean(cfg.Directory) {
			continue // the project's own, in its workspace
		}
		out = append(out, abs)
	}
	if cfg.DBPath != "" {
		if abs, err := filepath.Abs(cfg.credentialsPath()); err == nil {
			out = append(out, abs, abs+credential.ImportedSuffix)
		}
	}
	if cfg.TLSKey != "" {
		if abs, err := filepath.Abs(cfg.TLSKey); err == nil {
			out = append(out, abs)
		}
	}
	return out
}
