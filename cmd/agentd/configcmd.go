package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/config"
)

var configHelp = help{
	usage: "config check|print [flags]",
	about: `check reads the configuration serve and run would read (the user's agentd.json, the
working directory's, then --config) and reports every problem with its file, line and
column: unknown keys (with the nearest known one), wrong types, JSON syntax, unset
{env:VAR} references, models and rules that do not resolve. print writes the merged
result as JSON, secrets hidden.`,
	minArgs: 1, maxArgs: 1,
	examples: []string{
		"agentd config check",
		"agentd config check --config ci/agentd.json",
		"agentd config print | jq .provider",
	},
	env:   []string{"XDG_CONFIG_HOME   where the user's agentd.json lives (default ~/.config)"},
	exits: []string{"1  the configuration has problems (check), or cannot be read (print)"},
}

func cmdConfig(_ context.Context, args []string) error {
	fs := newFlags("config")
	configPath := fs.String("config", "", "configuration file read after the others")
	pos, err := parse(fs, configHelp, args)
	if err != nil {
		return err
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	setup := app.Setup{Workspace: wd, ConfigFile: *configPath, GlobalDir: app.DefaultGlobalDir()}
	switch pos[0] {
	case "check":
		return checkConfig(os.Stdout, setup)
	case "print":
		return printMergedConfig(setup)
	}
	return usageError(fs, fmt.Sprintf("unknown subcommand %q: want check or print", pos[0]))
}

// checkConfig applies the configuration as a server would, without
// starting one, and says what it read.
func checkConfig(w io.Writer, setup app.Setup) error {
	cfg, loaded, err := app.Configure(setup, app.Config{Logger: slog.New(slog.DiscardHandler)})
	for _, p := range loaded.Warnings {
		fmt.Fprintf(w, "warning: %s\n", p)
	}
	if err != nil {
		var ce *config.Error
		if errors.As(err, &ce) {
			for _, p := range ce.Problems {
				fmt.Fprintf(w, "error: %s\n", p)
			}
			return exitError{1}
		}
		return err
	}
	if len(loaded.Used) == 0 {
		fmt.Fprintf(w, "no configuration file (looked for %s)\n", strings.Join(setup.Paths(), ", "))
	}
	for _, f := range loaded.Used {
		fmt.Fprintf(w, "read %s\n", f)
	}
	def := cfg.Engine.DefaultModel
	fmt.Fprintf(w, "ok: model %s/%s; providers %s\n", def.ProviderID, def.ModelID, strings.Join(cfg.Models.Providers(), ", "))
	return nil
}

// printMergedConfig writes the merged configuration files as JSON, with
// keys, headers and environment values hidden.
func printMergedConfig(setup app.Setup) error {
	loaded, err := config.Load(setup.Paths(), setup.ConfigFile)
	if err != nil {
		return err
	}
	for _, f := range loaded.Used {
		fmt.Fprintf(os.Stderr, "read %s\n", f)
	}
	raw, err := json.Marshal(loaded.File)
	if err != nil {
		return err
	}
	var tree any
	if err := json.Unmarshal(raw, &tree); err != nil {
		return err
	}
	return printJSON(hideSecrets(dropEmpty(tree), ""))
}

// hideSecrets replaces API keys, the webhooks' secret and the values of
// headers and of MCP servers' environments.
func hideSecrets(v any, key string) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			switch {
			case (k == "apiKey" || k == "secret") && e != "":
				t[k] = "(hidden)"
			case (k == "headers" || k == "environment") && e != nil:
				if m, ok := e.(map[string]any); ok {
					for hk := range m {
						m[hk] = "(hidden)"
					}
				}
			default:
				t[k] = hideSecrets(e, k)
			}
		}
	case []any:
		for i, e := range t {
			t[i] = hideSecrets(e, key)
		}
	}
	return v
}

// dropEmpty removes keys whose value is null, "" or an empty object or
// array (after their own empty keys went), so that the print shows what
// the files set; false and 0 stay, since some of them mean something.
func dropEmpty(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			e = dropEmpty(e)
			if empty(e) {
				delete(t, k)
			} else {
				t[k] = e
			}
		}
	case []any:
		for i, e := range t {
			t[i] = dropEmpty(e)
		}
	}
	return v
}

func empty(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case string:
		return t == ""
	case map[string]any:
		return len(t) == 0
	case []any:
		return len(t) == 0
	}
	return false
}
