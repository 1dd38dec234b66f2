package app

import (
	"os"
	"path/filepath"

	"github.com/agentd/agentd/internal/command"
	"github.com/agentd/agentd/internal/skill"
)

// loadCommands makes the catalog of commands: the built-in ones, the
// global command files (agentd's configuration folder, or CommandDirs),
// each directory's project command files, and the configuration's. The
// global files and the server's own directory's are read once here, so
// that a broken one stops the start with its name.
func loadCommands(cfg Config) (*command.Catalog, error) {
	dirs := cfg.CommandDirs
	if dirs == nil {
		if d, err := os.UserConfigDir(); err == nil {
			dirs = append(dirs, filepath.Join(d, "agentd", "command"))
		}
	}
	check := command.Set{}
	for _, d := range dirs {
		if err := check.LoadDir(d); err != nil {
			return nil, err
		}
	}
	if err := check.LoadProject(cfg.Directory); err != nil {
		return nil, err
	}
	return &command.Catalog{Global: dirs, Config: cfg.Commands, ProjectAgents: cfg.ProjectCommandAgents, Logger: cfg.Logger}, nil
}

// skillDirs are the folders of the user's skills: SkillDirs, or the
// defaults (skill.GlobalFolders of the home and agentd's configuration
// folder).
func skillDirs(cfg Config) []string {
	if cfg.SkillDirs != nil {
		return cfg.SkillDirs
	}
	home, _ := os.UserHomeDir()
	conf := ""
	if d, err := os.UserConfigDir(); err == nil {
		conf = filepath.Join(d, "agentd")
	}
	return skill.GlobalFolders(home, conf)
}

// worktreeDir is where the git worktrees agentd makes live: WorktreeDir,
// or agentd-worktree beside agentd's data folder ($XDG_DATA_HOME, else
// ~/.local/share). Not inside it: the sandbox hides the data folder (the
// database, the snapshots) from the commands run for the model, and a
// session works in a worktree.
func worktreeDir(cfg Config) string {
	if cfg.WorktreeDir != "" {
		return cfg.WorktreeDir
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "agentd-worktree")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "share", "agentd-worktree")
	}
	return ""
}
