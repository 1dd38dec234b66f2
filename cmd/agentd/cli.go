package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// help is what a command's -h prints besides its flags.
type help struct {
	// usage follows "agentd ": "run [flags] PROMPT...".
	usage string
	// about says what the command does, in a sentence or two.
	about string
	// args bounds the positional arguments; max < 0 means any number.
	minArgs, maxArgs int
	examples         []string
	env              []string
	exits            []string
}

// commonExits are the exit codes every command shares.
var commonExits = []string{"0  done", "1  an error (printed on stderr)", "2  a usage error: a wrong flag or argument"}

// clientEnv are the variables of the commands that talk to a server.
var clientEnv = []string{
	"AGENTD_URL               the server (default http://127.0.0.1:4096; --url wins)",
	"AGENTD_SERVER_PASSWORD   basic auth password, when the server has one (OPENCODE_SERVER_PASSWORD too)",
	"AGENTD_SERVER_USERNAME   basic auth user (default opencode)",
	"AGENTD_API_KEY           an API key's token, sent as Authorization: Bearer instead of the password",
}

// newFlags returns a flag set for parse, which prints the help and the
// errors itself.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

func printHelp(w io.Writer, fs *flag.FlagSet, h help) {
	fmt.Fprintf(w, "usage: agentd %s\n\n%s\n", h.usage, h.about)
	printFlags(w, fs)
	section := func(title string, lines []string) {
		if len(lines) == 0 {
			return
		}
		fmt.Fprintf(w, "\n%s:\n", title)
		for _, l := range lines {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
	section("examples", h.examples)
	section("environment", h.env)
	// The command's own codes first; the common ones it did not redefine.
	var exits []string
	seen := map[string]bool{}
	for _, e := range append(append([]string{}, h.exits...), commonExits...) {
		code, text, _ := strings.Cut(e, "  ")
		if !seen[code] {
			seen[code] = true
			exits = append(exits, fmt.Sprintf("%-4s %s", code, text))
		}
	}
	section("exit codes", exits)
}

// printFlags lists the flags as they are written (--name), each with its
// kind of value and its default.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	first := true
	fs.VisitAll(func(f *flag.Flag) {
		if first {
			fmt.Fprintln(w, "\nflags:")
			first = false
		}
		kind, usage := flag.UnquoteUsage(f)
		name := "--" + f.Name
		if kind != "" {
			name += " " + kind
		}
		fmt.Fprintf(w, "  %s\n      %s", name, usage)
		if def := f.DefValue; def != "" && def != "false" && def != "0" && def != "[]" {
			fmt.Fprintf(w, " (default %s)", def)
		}
		fmt.Fprintln(w)
	})
}

// parse reads flags wherever they stand among the arguments (Go's flag
// package stops at the first argument, so `serve stray --port 1` would
// silently drop --port), up to a "--" after which everything is an
// argument. It returns the arguments, or an exitError: 0 after -h, 2 for
// a usage error, which it explains on stderr.
func parse(fs *flag.FlagSet, h help, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				printHelp(os.Stdout, fs, h)
				return nil, exitError{0}
			}
			return nil, usageError(fs, err.Error())
		}
		rest := fs.Args()
		if consumed := args[:len(args)-len(rest)]; len(consumed) > 0 && consumed[len(consumed)-1] == "--" {
			positional = append(positional, rest...)
			break
		}
		if len(rest) == 0 {
			break
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
	switch {
	case len(positional) < h.minArgs:
		return nil, usageError(fs, "missing argument: usage: agentd "+h.usage)
	case h.maxArgs >= 0 && len(positional) > h.maxArgs:
		extra := positional[h.maxArgs]
		msg := fmt.Sprintf("unexpected argument %q", extra)
		if h.maxArgs == 0 {
			msg = fmt.Sprintf("%s takes no arguments, got %q", fs.Name(), extra)
		}
		if !strings.HasPrefix(extra, "-") {
			msg += " (flags are written --name value)"
		}
		return nil, usageError(fs, msg)
	}
	return positional, nil
}

func usageError(fs *flag.FlagSet, msg string) error {
	fmt.Fprintf(os.Stderr, "agentd %s: %s\nRun \"agentd %s -h\" for its flags and examples.\n", fs.Name(), msg, fs.Name())
	return exitError{2}
}
