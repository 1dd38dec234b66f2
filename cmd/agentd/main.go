// Command agentd is a headless server for AI coding-agent sessions, and a
// client for it.
//
//	agentd serve [--hostname H] [--port P] [--db FILE] [--log-level L] [--log-format text|json]
//	agentd run "prompt" [--url URL] [--session ID]
//	agentd sessions | status [ID] | wait ID | events | abort ID | version
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

func main() {
	os.Exit(run(os.Args[1:]))
}

// exitError carries a process exit code through error returns.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

func run(args []string) int {
	if len(args) == 0 {
		usage()
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch args[0] {
	case "serve":
		err = cmdServe(ctx, args[1:])
	case "version", "--version", "-v":
		fmt.Println(version)
	case "sessions":
		err = cmdSessions(ctx, args[1:])
	case "status":
		err = cmdStatus(ctx, args[1:])
	case "wait":
		err = cmdWait(ctx, args[1:])
	case "events":
		err = cmdEvents(ctx, args[1:])
	case "abort":
		err = cmdAbort(ctx, args[1:])
	case "bench":
		err = cmdBench(ctx, args[1:])
	case "fakellm":
		err = cmdFakeLLM(ctx, args[1:])
	case "run":
		err = cmdRun(ctx, stop, args[1:])
	case "help", "-h", "--help":
		usage()
	default:
		fmt.Fprintf(os.Stderr, "agentd: unknown command %q\n", args[0])
		usage()
		return 2
	}
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentd:", err)
		return 1
	}
	return 0
}

func usage() {
	fmt.Fprint(os.Stderr, `usage: agentd <command> [flags]

commands:
  serve      run the server (embedded SQLite; the offline scripted model when no provider is configured)
  run        send a prompt and stream the answer (exit 0 succeeded, 1 failed, 130 interrupted)
  sessions   list sessions
  status     show one session's status, or every busy session's
  wait       wait until a session is idle
  events     print the event log (--after N, --follow)
  abort      abort a session's active run
  bench      measure a server (agentd by default) with fakellm as its model
  fakellm    serve the scripted fake model provider (OpenAI and Anthropic APIs) for tests and benchmarks
  version    print the version

Run "agentd <command> -h" for a command's flags.
`)
}
