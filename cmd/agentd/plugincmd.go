package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"text/tabwriter"

	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/plugin"
)

var pluginHelp = help{
	usage: "plugin install|list [flags] [SPEC...]",
	about: `install puts the npm plugins the configuration lists ("plugin": ["name@version", …]),
and the SPECs given, into the plugin folder (beside the database), with Bun and opencode's
plugin package and SDK: the only step that needs the package registry. list prints the
plugins serve would load, where each comes from and whether it is installed.`,
	minArgs: 1, maxArgs: -1,
	examples: []string{
		"agentd plugin install                        # what the configuration lists",
		"agentd plugin install opencode-pty@0.1.3     # one more (add it to \"plugin\" to load it)",
		"agentd plugin list",
	},
	env: []string{"AGENTD_DATABASE_URL   the database when --db is not given (its folder holds the plugin folder)"},
}

func cmdPlugin(ctx context.Context, args []string) error {
	fs := newFlags("plugin")
	configPath := fs.String("config", "", "configuration file read after the others")
	db := fs.String("db", defaultDBPath(), "the server's database: the plugin folder is beside it")
	dir := fs.String("dir", "", "the plugin folder (default: agentd.plugins.dir, else beside the database)")
	pos, err := parse(fs, pluginHelp, args)
	if err != nil {
		return err
	}
	if u := os.Getenv("AGENTD_DATABASE_URL"); u != "" && !flagSet(fs, "db") {
		*db = u
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	setup := app.Setup{Workspace: wd, ConfigFile: *configPath, GlobalDir: app.DefaultGlobalDir()}
	cfg, _, err := app.Configure(setup, app.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	folder := *dir
	if folder == "" {
		folder = cfg.Plugins.Dir
	}
	if folder == "" {
		folder = app.PluginDir(*db)
	}
	switch pos[0] {
	case "install":
		specs := pos[1:]
		for _, s := range cfg.Plugins.Specs {
			if !s.IsFile() {
				specs = append(specs, s.Spec)
			}
		}
		fmt.Fprintf(os.Stderr, "installing into %s\n", folder)
		return plugin.Install(ctx, folder, specs, os.Stderr)
	case "list":
		return listPlugins(folder, cfg.Plugins.Specs)
	}
	return usageError(fs, fmt.Sprintf("unknown subcommand %q: want install or list", pos[0]))
}

func listPlugins(folder string, specs []plugin.Spec) error {
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "folder\t%s\n", folder)
	bun := plugin.BunPath(folder)
	if bun == "" {
		bun = "missing (agentd plugin install)"
	}
	fmt.Fprintf(w, "bun\t%s\n", bun)
	if len(specs) == 0 {
		fmt.Fprintln(w, "plugins\tnone configured")
	}
	for _, s := range specs {
		state := "file"
		if !s.IsFile() {
			state = "installed " + plugin.Installed(folder, s.Path)
			if v := plugin.Installed(folder, s.Path); v == "" {
				state = "NOT INSTALLED (agentd plugin install)"
			}
		} else if _, err := os.Stat(s.Path); err != nil {
			state = "MISSING FILE"
		}
		fmt.Fprintf(w, "%s\t%s\n", s.Spec, state)
	}
	return w.Flush()
}
