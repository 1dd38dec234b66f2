// Package safegit runs git for agentd so that git runs no one's code and
// sees none of the server's secrets. Every git process agentd starts
// (snapshots, diffs, restores, /file/status) goes through Command:
//
//   - its environment is built from an allow-list (PATH, TMPDIR, a HOME
//     that holds nothing, LANG=C), never the server's, so provider keys
//     and passwords do not reach git or anything it could start;
//   - no system or global configuration is read (GIT_CONFIG_NOSYSTEM,
//     GIT_CONFIG_GLOBAL=/dev/null, GIT_ATTR_NOSYSTEM), and settings given
//     on the command line, which win over every file, switch off what
//     runs commands by configuration: fsmonitor, hooks, the attributes
//     file, pagers, editors, credential helpers, external diffs,
//     transports (so no lazy fetch), submodule recursion;
//   - the repository's own configuration is never read for a repository
//     agentd does not own (Project): git runs against a private git
//     directory whose configuration agentd writes, so filter, textconv and
//     diff drivers defined there have no command to run.
//
// What is left to the caller: attribute-named filters are only run when
// the configuration git reads defines them, so a repository whose
// configuration agentd writes (the snapshot store) or never lets git read
// (Project) runs none; diff commands still take --no-ext-diff and
// --no-textconv.
package safegit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// ErrNoGit is returned when git is not installed.
var ErrNoGit = errors.New("git is not installed")

var lookup = sync.OnceValues(func() (string, error) {
	p, err := exec.LookPath("git")
	if err != nil {
		return "", ErrNoGit
	}
	return p, nil
})

// Available reports whether git is installed.
func Available() bool {
	_, err := lookup()
	return err == nil
}

// Cmd is one git command.
type Cmd struct {
	// Dir is the working directory (default: WorkTree).
	Dir string
	// GitDir and WorkTree are GIT_DIR and GIT_WORK_TREE: with GitDir set,
	// git looks for no repository and reads no other configuration.
	GitDir, WorkTree string
	// IndexFile and ObjectDir, when set, are GIT_INDEX_FILE and
	// GIT_OBJECT_DIRECTORY.
	IndexFile, ObjectDir string
	// Alternates, when set, is GIT_ALTERNATE_OBJECT_DIRECTORIES: objects
	// read from there too, while new ones are written to ObjectDir.
	Alternates string
	// Args are git's arguments, the subcommand first.
	Args []string
	// Stdin is the command's standard input (none when nil).
	Stdin io.Reader
}

// Settings are given to every git with -c, after which no file can set
// them: each turns off a way git would start a program that its
// configuration names (or a network transport, or a write the caller did
// not ask for).
var Settings = []string{
	"core.fsmonitor=false",
	"core.hooksPath=/dev/null",
	"core.attributesFile=/dev/null",
	"core.pager=cat",
	"core.editor=:",
	"core.askPass=",
	"core.sshCommand=false",
	"core.gitProxy=",
	"credential.helper=",
	"diff.external=",
	"protocol.allow=never",
	"submodule.recurse=false",
	"diff.ignoreSubmodules=all",
	"status.submoduleSummary=false",
	"gc.auto=0",
	"maintenance.auto=false",
	"core.quotepath=false",
}

// Env is the whole environment of every git agentd runs, plus extra.
func Env(extra ...string) []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		// git finds nothing of the user's (config, attributes, ignores)
		// under a HOME that cannot hold files.
		"HOME=/dev/null",
		"LANG=C", "LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_ATTR_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0", "GIT_NO_LAZY_FETCH=1", "GIT_NO_REPLACE_OBJECTS=1",
		"GIT_PAGER=cat", "PAGER=cat", "GIT_EDITOR=:", "GIT_PROTOCOL_FROM_USER=0",
	}
	if t := os.Getenv("TMPDIR"); t != "" {
		env = append(env, "TMPDIR="+t)
	}
	return append(env, extra...)
}

// Command returns the exec.Cmd of c, not started: its environment is
// Env's and its settings begin with Settings. It returns ErrNoGit when
// git is not installed.
func Command(ctx context.Context, c Cmd) (*exec.Cmd, error) {
	git, err := lookup()
	if err != nil {
		return nil, err
	}
	args := make([]string, 0, 2*len(Settings)+len(c.Args))
	for _, s := range Settings {
		args = append(args, "-c", s)
	}
	cmd := exec.CommandContext(ctx, git, append(args, c.Args...)...)
	cmd.Dir = c.Dir
	if cmd.Dir == "" {
		cmd.Dir = c.WorkTree
	}
	var extra []string
	for _, kv := range [][2]string{{"GIT_DIR", c.GitDir}, {"GIT_WORK_TREE", c.WorkTree},
		{"GIT_INDEX_FILE", c.IndexFile}, {"GIT_OBJECT_DIRECTORY", c.ObjectDir}, {"GIT_ALTERNATE_OBJECT_DIRECTORIES", c.Alternates}} {
		if kv[1] != "" {
			extra = append(extra, kv[0]+"="+kv[1])
		}
	}
	cmd.Env = Env(extra...)
	cmd.Stdin = c.Stdin
	// A git killed by ctx leaves no pipe held open for long.
	cmd.WaitDelay = 5 * time.Second
	return cmd, nil
}

// Output runs c and returns its standard output; a failure's error holds
// the start of git's standard error.
func Output(ctx context.Context, c Cmd) ([]byte, error) {
	cmd, err := Command(ctx, c)
	if err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &limited{w: &stderr, n: 4096}
	out, err := cmd.Output()
	if err != nil {
		return out, Failure(c.Args, err, stderr.Bytes())
	}
	return out, nil
}

// Failure is the error of a git command that failed, with the start of
// what it wrote on standard error.
func Failure(args []string, err error, stderr []byte) error {
	msg := strings.TrimSpace(string(stderr))
	if len(msg) > 500 {
		msg = msg[:500]
	}
	name := "git"
	if len(args) > 0 {
		name += " " + args[0]
	}
	return fmt.Errorf("%s: %w: %s", name, err, msg)
}

// limited keeps the first n bytes written to it and drops the rest.
type limited struct {
	w io.Writer
	n int
}

func (l *limited) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		l.n -= k
		_, _ = l.w.Write(p[:k])
	}
	return len(p), nil
}

// Stderr returns a writer that keeps the first 4 KiB written to it in
// buf, for Failure.
func Stderr(buf *bytes.Buffer) io.Writer { return &limited{w: buf, n: 4096} }
