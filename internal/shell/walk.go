package shell

import (
	"slices"

	"mvdan.cc/sh/v3/syntax"
)

func (w *walker) stmts(list []*syntax.Stmt) {
	for _, st := range list {
		w.stmt(st)
	}
}

func (w *walker) stmt(st *syntax.Stmt) {
	if st == nil {
		return
	}
	chain := w.chain
	defer func() { w.chain = chain }()
	w.chain = w.chain && chainElement(st)
	switch x := st.Cmd.(type) {
	case *syntax.CallExpr:
		w.call(x, st.Redirs)
	case *syntax.DeclClause:
		w.decl(x)
	case *syntax.ArithmCmd:
		w.arith(x, x.X)
	case *syntax.LetClause:
		w.arith(x, x.Exprs...)
	case *syntax.TestClause:
		w.test(x)
	default:
		w.compound(st.Cmd)
	}
	for _, r := range st.Redirs {
		w.redirect(r)
	}
}

// chainElement reports a statement that is an element of an && chain
// (see binary): a simple command or a nested && list, not negated.
func chainElement(st *syntax.Stmt) bool {
	if st.Negated || st.Background {
		return false
	}
	switch x := st.Cmd.(type) {
	case *syntax.CallExpr:
		return true
	case *syntax.BinaryCmd:
		return x.Op == syntax.AndStmt
	}
	return false
}

// compound walks the commands of a compound command. Subshells and the
// parts of a pipeline get a scope of their own: a cd there does not move
// what follows.
func (w *walker) compound(cmd syntax.Command) {
	switch x := cmd.(type) {
	case *syntax.Subshell:
		w.nested(x.Stmts...)
	case *syntax.Block:
		w.stmts(x.Stmts)
	case *syntax.IfClause:
		w.stmts(x.Cond)
		w.cond++
		w.stmts(x.Then)
		if x.Else != nil {
			w.compound(x.Else)
		}
		w.cond--
	case *syntax.WhileClause:
		w.stmts(x.Cond)
		w.cond++
		w.stmts(x.Do)
		w.cond--
	case *syntax.ForClause:
		w.forClause(x)
	case *syntax.CaseClause:
		w.caseClause(x)
	case *syntax.BinaryCmd:
		w.binary(x)
	case *syntax.FuncDecl:
		w.cond++
		w.stmt(x.Body)
		w.cond--
	case *syntax.TimeClause:
		w.stmt(x.Stmt)
	case *syntax.CoprocClause:
		w.nested(x.Stmt)
	case *syntax.TestDecl:
		w.scanWord(x.Description)
		w.stmt(x.Body)
	}
}

// binary walks a pipeline (each part in a subshell), or a && or ||
// list. In an && chain each command runs only if the ones before it
// succeeded, so a cd there moves the rest of the chain; after the chain,
// the script may be where it started too.
func (w *walker) binary(x *syntax.BinaryCmd) {
	switch {
	case x.Op == syntax.Pipe || x.Op == syntax.PipeAll:
		w.nested(x.X)
		w.nested(x.Y)
		return
	case x.Op == syntax.AndStmt && !w.chain:
		before := slices.Clone(w.sc.dirs)
		w.chain = true
		w.binary(x)
		w.chain = false
		w.sc.dirs = union(before, w.sc.dirs)
		return
	}
	w.stmt(x.X)
	w.cond++
	w.stmt(x.Y)
	w.cond--
}

// nested walks statements that run in a subshell.
func (w *walker) nested(list ...*syntax.Stmt) {
	saved := w.sc
	w.sc = saved.clone()
	w.stmts(list)
	if w.sc.overflow {
		w.report(whyDirs)
	}
	w.sc = saved
}

// scan walks a word, assignment or expression: the substitutions in it
// are walked as scripts of their own, and the forms that run hidden code
// are reported.
func (w *walker) scan(n syntax.Node) {
	if n == nil {
		return
	}
	scanOpaque(n, w.report)
	syntax.Walk(n, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.CmdSubst:
			w.nested(n.Stmts...)
			return false
		case *syntax.ProcSubst:
			w.nested(n.Stmts...)
			return false
		}
		return true
	})
}

func (w *walker) scanWord(word *syntax.Word) {
	if word != nil {
		w.scan(word)
	}
}

func (w *walker) forClause(f *syntax.ForClause) {
	switch l := f.Loop.(type) {
	case *syntax.WordIter:
		var vals []string
		known := l.InPos.IsValid()
		for _, item := range l.Items {
			w.scanWord(item)
			v, ok := w.sc.expand(item)
			vals, known = append(vals, v...), known && ok
		}
		if DangerousName(l.Name.Value) {
			w.report(whyLoopVar)
		}
		w.sc.assign(l.Name.Value, vals, known)
	case *syntax.CStyleLoop:
		for _, x := range []syntax.ArithmExpr{l.Init, l.Cond, l.Post} {
			if x != nil {
				if arithOpaque(x) {
					w.report(whyArithmetic)
				}
				w.scan(x)
			}
		}
	}
	w.cond++
	w.stmts(f.Do)
	w.cond--
}

func (w *walker) caseClause(c *syntax.CaseClause) {
	w.scanWord(c.Word)
	for _, item := range c.Items {
		for _, p := range item.Patterns {
			w.scanWord(p)
		}
		w.cond++
		w.stmts(item.Stmts)
		w.cond--
	}
}

func (w *walker) redirect(r *syntax.Redirect) {
	w.scanWord(r.Hdoc)
	w.scanWord(r.Word)
	switch r.Op {
	case syntax.Hdoc, syntax.DashHdoc, syntax.WordHdoc:
		// Here-documents carry text, not file names.
		return
	case syntax.DplIn, syntax.DplOut:
		// >&2 and <&0 name descriptors; a file name after >& is a file.
		if r.Op == syntax.DplIn || r.Word == nil {
			return
		}
		if v, ok := Literal(r.Word); ok && (v == "-" || isDigits(v)) {
			return
		}
	}
	if r.Word == nil {
		return
	}
	out := Redirect{Text: w.text(r.Word), Write: r.Op != syntax.RdrIn, Dirs: slices.Clone(w.sc.dirs)}
	if targets, ok := w.sc.expand(r.Word); ok {
		out.Targets = slices.DeleteFunc(targets, func(t string) bool { return t == "" })
		if out.Targets == nil {
			out.Targets = []string{}
		}
	}
	w.s.Redirects = append(w.s.Redirects, out)
}

// arith judges (( … )) and let as commands of their own, whose pattern is
// their text; evaluating a variable makes them opaque.
func (w *walker) arith(n syntax.Node, xs ...syntax.ArithmExpr) {
	t := w.text(n)
	c := Command{Text: t, Pattern: t, Words: []string{t}, Dynamic: []bool{false}, raw: []string{t},
		exp: [][]string{nil}, Dirs: slices.Clone(w.sc.dirs)}
	for _, x := range xs {
		if arithOpaque(x) {
			c.Opaque = whyArithmetic
			c.Dynamic[0] = true
		}
	}
	w.s.Commands = append(w.s.Commands, c)
	for _, x := range xs {
		w.scan(x)
	}
}

// test judges [[ … ]] as a command: its operands are checked as paths,
// and its arithmetic comparisons and -v make it opaque.
func (w *walker) test(t *syntax.TestClause) {
	c := Command{Dirs: slices.Clone(w.sc.dirs)}
	c.push("[[", "[[", false, []string{"[["})
	var operands func(x syntax.TestExpr)
	operands = func(x syntax.TestExpr) {
		switch x := x.(type) {
		case *syntax.Word:
			v, ok := Literal(x)
			exp, _ := w.sc.expand(x)
			c.push(v, w.text(x), !ok, exp)
			if ok {
				w.reveal(v)
			}
		case *syntax.UnaryTest:
			c.push(x.Op.String(), x.Op.String(), false, nil)
			operands(x.X)
		case *syntax.BinaryTest:
			operands(x.X)
			c.push(x.Op.String(), x.Op.String(), false, nil)
			operands(x.Y)
		case *syntax.ParenTest:
			c.push("(", "(", false, nil)
			operands(x.X)
			c.push(")", ")", false, nil)
		}
	}
	operands(t.X)
	c.push("]]", "]]", false, nil)
	c.finish()
	if testOpaque(t.X) {
		c.Opaque = whyTestVar
	}
	w.s.Commands = append(w.s.Commands, c)
	w.scan(t.X)
}

// push adds a word to a command being built.
func (c *Command) push(value, raw string, dynamic bool, exp []string) {
	if dynamic {
		value = ""
	}
	c.Words = append(c.Words, value)
	c.Dynamic = append(c.Dynamic, dynamic)
	c.raw = append(c.raw, raw)
	c.exp = append(c.exp, exp)
}

// finish sets a built command's Text, Pattern and Args from its words.
func (c *Command) finish() {
	c.Text = joinWords(c.raw)
	c.Pattern = joinWords(c.patternWords())
	c.Args = nil
	for _, e := range c.exp[min(1, len(c.exp)):] {
		c.Args = append(c.Args, e...)
	}
}

// patternWords are the words as rules see them: literal values, and the
// text of the words that expand at run time.
func (c *Command) patternWords() []string {
	out := make([]string, len(c.Words))
	for i, v := range c.Words {
		if c.Dynamic[i] {
			v = c.raw[i]
		}
		out[i] = v
	}
	return out
}
