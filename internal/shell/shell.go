// Package shell reads a bash command the way permission rules need it: as
// the simple commands it would run — in lists, pipelines, subshells,
// functions, command and process substitutions, the literal scripts of
// bash -c, eval and trap, here-documents given to shells, and the
// commands wrappers such as env, nice, timeout, sudo and xargs run — the
// files its redirections and arguments name (expanded as bash would where
// the script shows how: braces, tildes, its own variables, cd), and the
// forms through which it may run code that no command shows (arithmetic
// on variables, ${!x}, ${x@P}, subscripts). It never runs anything; a
// command it cannot parse is an error, which callers treat as a reason to
// ask.
//
// What it cannot follow — a cd to a directory known only at run time, a
// variable set by a command, the files a script or archive names — is
// left to the OS sandbox under the tools.
package shell

import (
	"errors"
	"fmt"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// MaxLen is the longest command Parse reads; longer ones are refused
// rather than judged.
const MaxLen = 64 << 10

// maxDepth bounds how deep the scripts of bash -c and eval, and the
// commands of wrappers, are followed.
const maxDepth = 4

// Script is what a command would run and touch.
type Script struct {
	// Commands are the simple commands in source order, the nested ones
	// (substitutions, bash -c scripts, wrapped commands) included.
	Commands []Command
	// Redirects are the files the command's redirections name.
	Redirects []Redirect
	// Opaque lists, once each, why the script may run code that none of
	// its commands shows (arithmetic on variables, ${!x}, ${x@P}, array
	// subscripts): such a script is judged as a whole, and no grant covers
	// it.
	Opaque []string
}

// Command is one simple command: a call, an assignment statement, a
// declaration, (( … )), let or [[ … ]].
type Command struct {
	// Text is the command as written: its assignments and words joined by
	// one space, redirections left out (they are judged on their own) but
	// a here-document an interpreter reads included.
	Text string
	// Pattern is what rules are matched against: Text with the literal
	// words' quotes and escapes removed and braces expanded, so that "rm"
	// '-rf' and rm -rf meet the same rules.
	Pattern string
	// Words are the literal values of the words, quotes removed; a word
	// that expands at run time ($VAR, $(…), globs aside) is "" and marked
	// in Dynamic. For an assignment statement they are its assignments.
	Words   []string
	Dynamic []bool
	// Assigns is set when variables are assigned for the command alone
	// (PATH=… cmd), which can change what it runs.
	Assigns bool
	// Assignment is set for a statement that only assigns variables
	// (X=1 Y=$(id)); it changes every later command.
	Assignment bool
	// Wrapped is set for the command that a wrapper (nice rm), a prefix of
	// assignments (A=1 rm), a path (/bin/rm) or find -exec runs: judged by
	// the rules like the others, granted only exactly.
	Wrapped bool
	// Opaque is why the command runs code its text does not show (its
	// name is only known at run time, it reads its program from a pipe,
	// printf -v, test -v …); "" when it does not. No grant covers it.
	Opaque string
	// Dirs are the directories it may run in: the script's own, and those
	// a literal cd before it may have led to.
	Dirs []string
	// Args are its arguments expanded as far as the script shows (see
	// Script); arguments only known at run time are left out.
	Args []string

	raw []string   // each word as written
	exp [][]string // each word's expansions, nil when only known at run time
	fed bool       // a wrapper gives it arguments known only at run time
	// varies: a variable that changes what runs (PATH, LD_PRELOAD) is
	// given it a value known only at run time; no grant can pin that.
	varies bool
}

// Redirect is one redirection to or from a file.
type Redirect struct {
	// Targets are the files it may name, expanded as far as the script
	// shows; nil when only known at run time.
	Targets []string
	// Text is the target as written.
	Text string
	// Write is set for redirections that create or change the file.
	Write bool
	// Dirs are the directories relative targets are resolved against.
	Dirs []string
}

// ErrTooLong is returned for commands over MaxLen bytes.
var ErrTooLong = fmt.Errorf("command is longer than %d bytes", MaxLen)

// Parse reads src as bash, with nothing known of where it runs.
func Parse(src string) (*Script, error) { return ParseIn(src, Env{}) }

// ParseIn reads src as bash that starts in env.
func ParseIn(src string, env Env) (*Script, error) {
	if len(src) > MaxLen {
		return nil, ErrTooLong
	}
	s := &Script{}
	w := &walker{s: s, sc: newScope(env)}
	if err := w.parse(src, 0, w.sc); err != nil {
		return nil, err
	}
	if w.sc.overflow {
		w.report(whyDirs)
	}
	return s, nil
}

// walker walks one parsed script (src) of a Script.
type walker struct {
	s     *Script
	src   string
	depth int
	sc    *scope
	err   error
	// cond counts the branches, loops and function bodies around the
	// point walked: what happens there may not happen at all.
	cond int
	// chain is set while the simple commands of an && chain are walked:
	// each runs only if those before it succeeded, a cd included.
	chain bool
}

// parse reads src as a script nested depth levels deep (bash -c, eval)
// and walks it in scope sc.
func (w *walker) parse(src string, depth int, sc *scope) error {
	if depth > maxDepth {
		return errors.New("scripts nested too deep")
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
	if err != nil {
		return err
	}
	sub := &walker{s: w.s, src: src, depth: depth, sc: sc, cond: w.cond}
	sub.stmts(f.Stmts)
	if sub.err != nil && depth > 0 {
		return fmt.Errorf("inner script: %w", sub.err)
	}
	return sub.err
}

// inner walks a literal script that a command runs: in the same shell
// (eval) or a child one (bash -c).
func (w *walker) inner(src string, shared bool) {
	sc := w.sc
	if !shared {
		sc = sc.clone()
	}
	if err := w.parse(src, w.depth+1, sc); err != nil && w.err == nil {
		w.err = err
	}
}

// reveal walks the command substitutions written inside a literal value
// (x='a[$(id)0]'), which bash runs if the value is ever evaluated (as a
// subscript, by ${x@P} or eval). What they run is judged like the rest;
// a value that does not read as such is left alone.
func (w *walker) reveal(value string) {
	if w.depth >= maxDepth || !strings.Contains(value, "$(") && !strings.Contains(value, "`") {
		return
	}
	doc, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Document(strings.NewReader(value))
	if err != nil || doc == nil {
		return
	}
	sub := &walker{s: w.s, src: value, depth: w.depth + 1, sc: w.sc.clone()}
	sub.scan(doc)
}

// report records a script-level reason to judge the script as a whole.
func (w *walker) report(why string) {
	for _, o := range w.s.Opaque {
		if o == why {
			return
		}
	}
	w.s.Opaque = append(w.s.Opaque, why)
}

// text is a node's source text.
func (w *walker) text(n syntax.Node) string {
	start, end := n.Pos().Offset(), n.End().Offset()
	if start > end || end > uint(len(w.src)) {
		return ""
	}
	return w.src[start:end]
}
