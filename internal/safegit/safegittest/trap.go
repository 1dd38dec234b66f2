// Package safegittest sets the traps a hostile model or repository would
// set for agentd's git: configuration and attributes that name commands
// (filters, textconv and diff drivers, fsmonitor, hooks, pagers), each a
// script that leaves a marker file outside the workspace and dumps its
// environment there. A test sets them, drives agentd's git, and checks
// that nothing ran and no secret was seen.
package safegittest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// SecretVar is the variable a trap's test sets in its own environment:
// a git that saw it would have been given the server's environment.
const SecretVar = "AGENTD_TRAP_SECRET"

// Trap is a set of hostile commands and the folder, outside the
// workspace, where they would leave their markers.
type Trap struct {
	// Out is where a command that ran leaves ran-<what> and env-<what>.
	Out string
	// Script runs with the name of what ran it as its first argument.
	Script string
}

// New writes the trap's script. Tests that check the environment call
// t.Setenv(SecretVar, …) themselves (it excludes t.Parallel).
func New(t testing.TB) *Trap {
	t.Helper()
	out := t.TempDir()
	tr := &Trap{Out: out, Script: filepath.Join(out, "trap.sh")}
	script := fmt.Sprintf(`#!/bin/sh
env > %[1]q/env-"$1"
touch %[1]q/ran-"$1"
case "$1" in
textconv) exec cat "$2" ;;
clean|smudge) exec cat ;;
esac
exit 0
`, out)
	if err := os.WriteFile(tr.Script, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	hooks := filepath.Join(out, "hooks")
	if err := os.Mkdir(hooks, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"post-checkout", "post-index-change", "reference-transaction", "pre-commit", "post-commit", "pre-auto-gc", "fsmonitor-watchman"} {
		hook := fmt.Sprintf("#!/bin/sh\nexec %q hook-%s \"$@\"\n", tr.Script, h)
		if err := os.WriteFile(filepath.Join(hooks, h), []byte(hook), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

// Config is git configuration text whose every command is the trap's.
func (tr *Trap) Config() string {
	s := tr.Script
	return fmt.Sprintf(`[core]
	fsmonitor = %[1]q fsmonitor
	hooksPath = %[2]q
	pager = %[1]q pager
	editor = %[1]q editor
	attributesFile = %[3]q
[filter "x"]
	clean = %[1]q clean
	smudge = %[1]q smudge
	required = true
[filter "p"]
	process = %[1]q process
[diff "x"]
	textconv = %[1]q textconv
	command = %[1]q diffcommand
[diff]
	external = %[1]q external
[credential]
	helper = %[1]q credential
[include]
	path = %[4]q
`, s, filepath.Join(tr.Out, "hooks"), filepath.Join(tr.Out, "attributes"), filepath.Join(tr.Out, "included"))
}

// Attributes is .gitattributes text that names the trap's drivers for
// every file, directly and through a macro.
func (tr *Trap) Attributes() string {
	return "[attr]evil filter=x diff=x\n* filter=x diff=x\n*.txt evil\n*.md filter=p\n"
}

// WriteSide writes the files the trap's configuration points at outside
// the workspace: a global attributes file and an included configuration
// (both with the same commands).
func (tr *Trap) WriteSide(t testing.TB) {
	t.Helper()
	inc := strings.ReplaceAll(tr.Config(), "[include]", "[x-include]")
	for name, body := range map[string]string{"attributes": tr.Attributes(), "included": "[filter \"y\"]\n\tclean = " + tr.Script + " included\n" + inc} {
		if err := os.WriteFile(filepath.Join(tr.Out, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Check fails t when a trap command ran or a git saw the secret.
func (tr *Trap) Check(t testing.TB) {
	t.Helper()
	entries, err := os.ReadDir(tr.Out)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, "ran-") {
			t.Errorf("git ran the configured command %q", strings.TrimPrefix(name, "ran-"))
		}
		if strings.HasPrefix(name, "env-") {
			b, _ := os.ReadFile(filepath.Join(tr.Out, name))
			if strings.Contains(string(b), SecretVar) {
				t.Errorf("a command git ran (%s) saw the server's environment (%s)", strings.TrimPrefix(name, "env-"), SecretVar)
			}
		}
	}
}
