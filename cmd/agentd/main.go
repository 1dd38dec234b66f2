// Command agentd is a headless server for AI coding-agent sessions, and a
// client for it.
//
//	agentd serve [flags]                      the server
//	agentd run [flags] PROMPT...              one prompt, its answer streamed
//	agentd sessions | status | wait | events | abort    client commands
//	agentd key create|list|revoke|budget      API keys
//	agentd config check|print                 the configuration, checked
//	agentd bench | fakellm                    measuring and testing
//
// Every command explains itself with -h.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

func main() {
	os.Exit(run(os.Args[1:]))
}

// exitError carries a process exit code through error returns; what went
// wrong was already said.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// commands maps each command to its function and one line for the list.
var commands = []struct {
	name, summary string
	run           func(ctx context.Context, stop context.CancelFunc, args []string) error
}{
	{"serve", "run the server (embedded SQLite; the offline scripted model when no provider is configured)", plain(cmdServe)},
	{"run", "send a prompt and stream the answer; asks you about the model's permission requests", cmdRun},
	{"sessions", "list sessions with their status and how their last run ended", plain(cmdSessions)},
	{"status", "one session's status, or every busy session's", plain(cmdStatus)},
	{"wait", "wait until a session is idle; the exit code says how its last run ended", plain(cmdWait)},
	{"events", "print the event log (--after N, --follow)", plain(cmdEvents)},
	{"abort", "abort a session's active run", plain(cmdAbort)},
	{"key", "make, list and revoke API keys (bearer tokens that see only their own sessions) and their budgets", plain(cmdKey)},
	{"config", "check the configuration (check), or print the merged result (print)", plain(cmdConfig)},
	{"plugin", "install opencode plugins into the plugin folder (install), or list what serve loads (list)", plain(cmdPlugin)},
	{"bench", "measure a server (agentd by default) with fakellm as its model", plain(cmdBench)},
	{"fakellm", "serve the scripted fake model provider (OpenAI and Anthropic APIs) for tests and benchmarks", plain(cmdFakeLLM)},
	{"version", "print the version", plain(cmdVersion)},
}

func plain(f func(context.Context, []string) error) func(context.Context, context.CancelFunc, []string) error {
	return func(ctx context.Context, _ context.CancelFunc, args []string) error { return f(ctx, args) }
}

func run(args []string) int {
	if len(args) == 0 {
		usage(os.Stderr)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch name := args[0]; name {
	case "help", "-h", "--help":
		if len(args) > 1 {
			return run([]string{args[1], "-h"})
		}
		usage(os.Stdout)
		return 0
	case "--version", "-v":
		err = cmdVersion(ctx, nil)
	default:
		found := false
		for _, c := range commands {
			if c.name == name {
				found = true
				err = c.run(ctx, stop, args[1:])
			}
		}
		if !found {
			fmt.Fprintf(os.Stderr, "agentd: unknown command %q\n\n", name)
			usage(os.Stderr)
			return 2
		}
	}
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentd:", explain(err))
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprint(w, "usage: agentd <command> [flags] [arguments]\n\ncommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-9s  %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
Run "agentd <command> -h" for a command's flags, examples, environment and exit codes.

Start here:
  agentd serve                  the server on http://127.0.0.1:4096 (dashboard at /ui)
  agentd run "reply:hello"      one prompt through an embedded server
`)
}

var versionHelp = help{usage: "version", about: "Prints agentd's version."}

func cmdVersion(_ context.Context, args []string) error {
	if _, err := parse(newFlags("version"), versionHelp, args); err != nil {
		return err
	}
	fmt.Println(version)
	return nil
}
