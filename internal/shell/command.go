package shell

import (
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

func joinWords(ws []string) string { return strings.Join(ws, " ") }

// call judges a simple command with the redirections of its statement.
func (w *walker) call(x *syntax.CallExpr, redirs []*syntax.Redirect) {
	if len(x.Args) == 0 {
		w.assignment(x.Assigns)
		return
	}
	c := Command{Assigns: len(x.Assigns) > 0, Dirs: slices.Clone(w.sc.dirs)}
	var text, prefix []string
	for _, a := range x.Assigns {
		v, ok := w.assignWord(a)
		text, prefix = append(text, w.text(a)), append(prefix, v)
		c.varies = c.varies || !ok && a.Name != nil && DangerousName(a.Name.Value)
	}
	for _, arg := range x.Args {
		text = append(text, w.text(arg))
		w.word(&c, arg)
	}
	c.finish()
	c.Text = joinWords(text)
	c.Pattern = joinWords(append(prefix, c.patternWords()...))
	w.add(c, w.stdinOf(redirs), 0)
	for _, a := range x.Assigns {
		w.revealAssign(a)
		w.scan(a)
	}
	for _, arg := range x.Args {
		w.scan(arg)
	}
}

// word adds an argument to c: its literal value (a brace expansion of
// literal words becomes its words: {rm,-rf,x} is rm -rf x), or its text
// when it expands at run time.
func (w *walker) word(c *Command, arg *syntax.Word) {
	split := braces(arg)
	v, ok := Literal(arg)
	if ok && len(split) > 1 && *w.sc.budget >= len(split) {
		*w.sc.budget -= len(split)
		for _, b := range split {
			bv, _ := Literal(b)
			exp, _ := w.sc.expand(b)
			c.push(bv, bv, false, exp)
		}
		return
	}
	// A brace expansion not expanded (too large) is only known at run time.
	exp, _ := w.sc.expand(arg)
	c.push(v, w.text(arg), !ok || len(split) != 1, exp)
}

// assignment judges a statement that only assigns variables.
func (w *walker) assignment(assigns []*syntax.Assign) {
	c := Command{Assignment: true, Dirs: slices.Clone(w.sc.dirs)}
	for _, a := range assigns {
		v, ok := w.assignWord(a)
		c.push(v, w.text(a), !ok, nil)
	}
	c.Text = joinWords(c.raw)
	c.Pattern = joinWords(c.patternWords())
	w.add(c, nil, 0)
	for _, a := range assigns {
		w.revealAssign(a)
		w.scan(a)
		w.assignScope(a)
	}
}

// decl judges export, declare, local, readonly and typeset, which change
// the environment of every later command.
func (w *walker) decl(d *syntax.DeclClause) {
	c := Command{Dirs: slices.Clone(w.sc.dirs)}
	c.push(d.Variant.Value, d.Variant.Value, false, nil)
	for _, a := range d.Args {
		v, ok := w.assignWord(a)
		c.push(v, w.text(a), !ok, nil)
	}
	c.finish()
	w.add(c, nil, 0)
	for _, a := range d.Args {
		w.revealAssign(a)
		w.scan(a)
		if a.Name != nil && !a.Naked {
			w.assignScope(a)
		}
	}
}

// assignWord is an assignment as a word: NAME=value with the value's
// quotes removed, and whether it is literal.
func (w *walker) assignWord(a *syntax.Assign) (string, bool) {
	switch {
	case a.Name == nil:
		if a.Value == nil {
			return "", false
		}
		return Literal(a.Value)
	case a.Naked:
		return a.Name.Value, true
	case a.Index != nil || a.Array != nil:
		return w.text(a), false
	}
	op := "="
	if a.Append {
		op = "+="
	}
	if a.Value == nil {
		return a.Name.Value + op, true
	}
	v, ok := Literal(a.Value)
	if !ok {
		return w.text(a), false
	}
	return a.Name.Value + op + v, true
}

// revealAssign walks the substitutions hidden in an assignment's literal
// values (see reveal).
func (w *walker) revealAssign(a *syntax.Assign) {
	values := []*syntax.Word{a.Value}
	if a.Array != nil {
		for _, e := range a.Array.Elems {
			values = append(values, e.Value)
		}
	}
	for _, v := range values {
		if v == nil {
			continue
		}
		if lit, ok := Literal(v); ok {
			w.reveal(lit)
		}
	}
}

// assignScope records what an assignment statement leaves in a variable.
func (w *walker) assignScope(a *syntax.Assign) {
	if a.Name == nil {
		return
	}
	name := a.Name.Value
	switch {
	case a.Index != nil || a.Array != nil || a.Append:
		w.sc.assign(name, nil, false)
	case a.Value == nil:
		w.sc.assign(name, []string{""}, true)
	default:
		vals, ok := w.sc.expand(a.Value)
		// Only an assignment every run makes replaces what the variable
		// held; one in a branch or a loop adds to it.
		if w.cond == 0 && ok {
			delete(w.sc.vars, name)
			w.sc.vars[name] = &variable{}
		}
		w.sc.assign(name, vals, ok)
	}
}

// add records a command, then what it runs: the script it is given, the
// command a wrapper or an assignment prefix runs, the command a path
// names; and what it changes for later commands (cd, variables).
func (w *walker) add(c Command, doc *stdinDoc, depth int) {
	if c.Opaque == "" {
		c.Opaque = commandOpaque(&c)
	}
	runs := len(c.Words) > 0 && !c.Dynamic[0] && !c.Assignment
	var u unwrapped
	wrapped := false
	if runs {
		w.interpreter(&c, doc)
		u, wrapped = c.unwrap()
	}
	w.s.Commands = append(w.s.Commands, c)
	if !runs {
		return
	}
	w.scripts(c, doc)
	w.effects(c)
	if depth >= maxDepth {
		return
	}
	if wrapped && u.hasScr {
		w.inner(u.script, false)
	}
	if wrapped && u.from > 0 {
		in := c.inner(u.from)
		in.fed = u.feeds
		w.add(in, doc, depth+1)
	}
	if c.Assigns || strings.Contains(c.Words[0], "/") {
		// What runs, without the assignments or the directory: the rules
		// written for "rm *" see A=1 /bin/rm too. What it runs in turn
		// was followed above.
		bare := c
		bare.Assigns, bare.Wrapped, bare.Opaque, bare.varies = false, true, "", false
		bare.Words = slices.Clone(c.Words)
		bare.Words[0] = baseName(c.Words[0])
		bare.Pattern = joinWords(bare.patternWords())
		bare.Text = joinWords(bare.raw)
		bare.Opaque = commandOpaque(&bare)
		w.interpreter(&bare, doc)
		w.s.Commands = append(w.s.Commands, bare)
	}
}

// interpreter marks what a shell or interpreter runs: a here-document it
// reads joins its pattern, and a program it reads from a pipe or a file
// (or made of a wrapper's input) makes it opaque.
func (w *walker) interpreter(c *Command, doc *stdinDoc) {
	in, ok := interpreterOf(c.Words[0])
	if !ok {
		return
	}
	reads := in.readsProgram(c.Words[1:])
	switch {
	case doc != nil:
		c.Text += " " + doc.text
		c.Pattern += " " + doc.text
		if reads && !doc.literal && c.Opaque == "" {
			c.Opaque = whyText
		}
	case c.fed:
		c.Opaque = whyFed
	case reads && c.Opaque == "":
		c.Opaque = whyStdin
	}
}

// scripts walks the literal scripts c runs: bash -c's, eval's, trap's,
// an alias's, and the here-document a shell reads as its program.
func (w *walker) scripts(c Command, doc *stdinDoc) {
	if src, shared, ok := c.script(); ok {
		w.inner(src, shared)
	}
	if baseName(c.Words[0]) == "alias" {
		// What an alias will run, should aliases be expanded.
		for i, a := range c.Words[1:] {
			if _, v, ok := strings.Cut(a, "="); ok && !c.Dynamic[i+1] {
				w.inner(v, true)
			}
		}
	}
	if in, ok := interpreterOf(c.Words[0]); ok && in.shell && doc != nil && doc.literal && in.readsProgram(c.Words[1:]) {
		w.inner(doc.value, false)
	}
}

// effects records what c changes for the commands after it: the
// directory (cd, pushd) and the variables it sets.
func (w *walker) effects(c Command) {
	switch baseName(c.Words[0]) {
	case "cd", "pushd":
		w.cd(c)
	case "source", ".":
		w.sc.lost = true
	case "eval":
		if slices.Contains(c.Dynamic[1:], true) {
			w.sc.lost = true
		}
	case "read", "mapfile", "readarray", "getopts", "printf", "unset", "wait", "declare", "typeset", "local", "export", "readonly":
		for i, a := range c.Words[1:] {
			if c.Dynamic[i+1] {
				w.sc.lost = true
			} else if name, _, _ := strings.Cut(a, "="); isName(name) {
				w.sc.assign(name, nil, false)
			}
		}
	}
}

// cd follows a cd to a directory the script shows: its operand, HOME when
// there is none, OLDPWD for "-".
func (w *walker) cd(c Command) {
	var targets []string
	known := true
	operand := false
	for i := 1; i < len(c.Words) && !operand; i++ {
		a := c.Words[i]
		switch {
		case c.Dynamic[i]:
			targets, known, operand = c.exp[i], c.exp[i] != nil, true
		case a == "-":
			targets, known = w.sc.lookup("OLDPWD")
			operand = true
		case strings.HasPrefix(a, "-") || strings.HasPrefix(a, "+"):
		default:
			targets, known, operand = c.exp[i], c.exp[i] != nil, true
		}
	}
	if !operand {
		targets, known = w.sc.lookup("HOME")
	}
	if known {
		w.sc.cd(slices.DeleteFunc(slices.Clone(targets), func(t string) bool { return t == "" }), w.chain)
	}
}

// stdinDoc is a here-document or here-string given to a command's input.
type stdinDoc struct {
	text    string // as written, for the pattern
	value   string // its text as the command reads it
	literal bool   // no expansion in it
}

func (w *walker) stdinOf(redirs []*syntax.Redirect) *stdinDoc {
	for _, r := range redirs {
		if r.N != nil && r.N.Value != "0" {
			continue
		}
		switch r.Op {
		case syntax.Hdoc, syntax.DashHdoc:
			d := &stdinDoc{text: r.Op.String() + w.text(r.Word) + "\n", literal: true}
			if r.Hdoc != nil {
				d.text += w.text(r.Hdoc)
				d.value, d.literal = heredocValue(r)
			}
			return d
		case syntax.WordHdoc:
			v, ok := Literal(r.Word)
			return &stdinDoc{text: "<<< " + w.text(r.Word), value: v + "\n", literal: ok}
		}
	}
	return nil
}

// heredocValue is a here-document's body as the command reads it: as
// written when its delimiter is quoted, else with bash's escapes removed,
// and whether it expands nothing.
func heredocValue(r *syntax.Redirect) (string, bool) {
	_, lit := r.Word.Parts[0].(*syntax.Lit)
	quoted := !lit || len(r.Word.Parts) != 1 || strings.Contains(r.Word.Lit(), `\`)
	var b strings.Builder
	for _, p := range r.Hdoc.Parts {
		l, ok := p.(*syntax.Lit)
		if !ok {
			return "", false
		}
		if quoted {
			b.WriteString(l.Value)
		} else {
			b.WriteString(unescape(l.Value, true))
		}
	}
	return b.String(), true
}
