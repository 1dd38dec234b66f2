package shell

import (
	"slices"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"
)

// Forms through which bash runs code that the script's text does not
// show. Bash evaluates an array subscript inside a variable's value when
// the value is used as a number or a name: with x='a[$(id)0]', each of
// (( x )), $(( x )), let x, [[ x -eq 1 ]], ${s:x}, ${arr[x]}, test -v
// "$x", printf -v "$x", read "$x" and declare -n r="$x" runs id. ${x@P}
// runs the substitutions in x's value; ${!x} uses x's value as a name,
// subscript included. A script holding one of them is judged as a whole.
const (
	whyArithmetic = "arithmetic evaluates variables' values as code"
	whySubscript  = "an array subscript is evaluated as arithmetic"
	whyIndirect   = "${!…} uses a variable's value as a name"
	whyPrompt     = "${…@P} runs the substitutions in a variable's value"
	whyTestVar    = "a test of a variable or a number evaluates its subscript"
	whyVarName    = "a variable named by a subscript or at run time"
	whyName       = "the command's name is only known at run time"
	whyStdin      = "it reads the program it runs from its input"
	whyText       = "it runs text only known at run time"
	whyHash       = "hash -p changes what a name runs"
	whyLoopVar    = "a loop assigns a variable that changes what runs"
	whyDirs       = "it changes directory more often than can be followed"
	whyFed        = "it runs a program made of its input"
)

// scanOpaque reports the forms of a word, assignment or expression that
// run hidden code, without descending into command substitutions (their
// commands are judged on their own).
func scanOpaque(n syntax.Node, report func(string)) {
	syntax.Walk(n, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.CmdSubst, *syntax.ProcSubst:
			return false
		case *syntax.ArithmExp:
			if arithOpaque(n.X) {
				report(whyArithmetic)
			}
		case *syntax.ParamExp:
			if why := paramOpaque(n); why != "" {
				report(why)
			}
		case *syntax.Assign:
			if n.Index != nil && !plainIndex(n.Index) {
				report(whySubscript)
			}
		case *syntax.ArrayElem:
			if n.Index != nil && !plainIndex(n.Index) {
				report(whySubscript)
			}
		}
		return true
	})
}

func paramOpaque(p *syntax.ParamExp) string {
	switch {
	case p.Excl && p.Names == 0 && (p.Index == nil || !allIndex(p.Index)):
		return whyIndirect
	case p.Exp != nil && p.Exp.Op == syntax.OtherParamOps && p.Exp.Word != nil && strings.Contains(p.Exp.Word.Lit(), "P"):
		return whyPrompt
	case p.Index != nil && !plainIndex(p.Index):
		return whySubscript
	case p.Slice != nil && (arithOpaque(p.Slice.Offset) || arithOpaque(p.Slice.Length)):
		return whySubscript
	}
	return ""
}

// arithOpaque reports whether evaluating an arithmetic expression may run
// code: it uses anything but number literals and the shell's numeric
// parameters ($#, $?, $$, $!, ${#x}).
func arithOpaque(x syntax.ArithmExpr) bool {
	if x == nil {
		return false
	}
	opaque := false
	syntax.Walk(x, func(n syntax.Node) bool {
		if w, ok := n.(*syntax.Word); ok {
			if !numericWord(w) {
				opaque = true
			}
			return false
		}
		return !opaque
	})
	return opaque
}

func numericWord(w *syntax.Word) bool {
	if len(w.Parts) == 1 {
		if p, ok := w.Parts[0].(*syntax.ParamExp); ok {
			return numericParam(p)
		}
	}
	v := w.Lit()
	return v != "" && v[0] >= '0' && v[0] <= '9'
}

func numericParam(p *syntax.ParamExp) bool {
	if p.Param == nil || p.Excl || p.Index != nil || p.Slice != nil || p.Repl != nil || p.Exp != nil {
		return false
	}
	return p.Length || strings.Contains("#?$!", p.Param.Value) && len(p.Param.Value) == 1
}

// plainIndex reports a subscript that evaluates nothing: a number, @ or *.
func plainIndex(x syntax.ArithmExpr) bool {
	return allIndex(x) || !arithOpaque(x)
}

func allIndex(x syntax.ArithmExpr) bool {
	w, ok := x.(*syntax.Word)
	return ok && (w.Lit() == "@" || w.Lit() == "*")
}

// testOpaque reports the [[ … ]] forms that evaluate hidden code: -v and
// -R on a name, and the arithmetic comparisons.
func testOpaque(x syntax.TestExpr) bool {
	opaque := false
	syntax.Walk(x, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.CmdSubst, *syntax.ProcSubst:
			return false
		case *syntax.UnaryTest:
			if n.Op == syntax.TsVarSet || n.Op == syntax.TsRefVar {
				opaque = true
			}
		case *syntax.BinaryTest:
			switch n.Op {
			case syntax.TsEql, syntax.TsNeq, syntax.TsLeq, syntax.TsGeq, syntax.TsLss, syntax.TsGtr:
				x, xok := n.X.(*syntax.Word)
				y, yok := n.Y.(*syntax.Word)
				if !xok || !yok || !numericWord(x) || !numericWord(y) {
					opaque = true
				}
			}
		}
		return !opaque
	})
	return opaque
}

// commandOpaque is why a simple command, by its own words, runs code its
// text does not show ("" when it does not).
func commandOpaque(c *Command) string {
	if len(c.Words) == 0 || c.Assignment {
		return ""
	}
	if c.Dynamic[0] {
		return whyName
	}
	name := baseName(c.Words[0])
	if in, ok := interpreterOf(name); ok && in.shell {
		if i := c.shellScript(); i > 0 && c.Dynamic[i] {
			return whyText
		}
	}
	if check, ok := builtinChecks[name]; ok {
		return check(c.Words[1:], c.raw[1:], c.Dynamic[1:])
	}
	return ""
}

// builtinChecks find, in the arguments of builtins that take variable
// names or text to run (their values, as written, and which are dynamic),
// what makes them run hidden code.
var builtinChecks = map[string]func(args, raw []string, dyn []bool) string{
	"test": testArgs, "[": testArgs,
	"printf": func(args, _ []string, _ []bool) string {
		return why(len(args) > 0 && strings.HasPrefix(args[0], "-v"), whyVarName)
	},
	"read": namesHidden, "mapfile": namesHidden, "readarray": namesHidden, "getopts": namesHidden,
	"unset":   namesHidden,
	"wait":    func(args, _ []string, _ []bool) string { return why(hasFlag(args, 'p'), whyVarName) },
	"hash":    func(args, _ []string, _ []bool) string { return why(hasFlag(args, 'p'), whyHash) },
	"declare": declOpaque, "typeset": declOpaque, "local": declOpaque, "export": declOpaque,
	"readonly": declOpaque, "nameref": declOpaque,
	"let":  func(_, _ []string, _ []bool) string { return whyArithmetic },
	"eval": runsText, "source": runsText, ".": runsText, "trap": runsText,
}

func why(cond bool, reason string) string {
	if cond {
		return reason
	}
	return ""
}

func hasFlag(args []string, flag rune) bool {
	return slices.ContainsFunc(args, func(a string) bool {
		return strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.ContainsRune(a, flag)
	})
}

func testArgs(args, _ []string, _ []bool) string {
	return why(slices.Contains(args, "-v") || slices.Contains(args, "-R"), whyTestVar)
}

func runsText(args, _ []string, dyn []bool) string {
	if slices.ContainsFunc(args, stdinFile) {
		return whyStdin
	}
	return why(slices.Contains(dyn, true), whyText)
}

// namesHidden finds arguments of a builtin that assigns variables by name
// which are only known at run time, carry a subscript, or name a variable
// that changes what runs.
func namesHidden(args, _ []string, dyn []bool) string {
	for i, a := range args {
		if dyn[i] || strings.Contains(a, "[") || DangerousName(a) {
			return whyVarName
		}
	}
	return ""
}

// declOpaque finds declarations that make later assignments evaluate
// (-i, and -n which makes a name stand for another), or whose names are
// only known at run time.
func declOpaque(args, raw []string, dyn []bool) string {
	for i, a := range args {
		if dyn[i] {
			name, _, _ := strings.Cut(raw[i], "=")
			if !isName(name) {
				return whyVarName
			}
			continue
		}
		if strings.HasPrefix(a, "-") && strings.ContainsAny(a, "in") {
			return whyVarName
		}
	}
	return ""
}

func isName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, r := range s {
		if r != '_' && (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// dangerousNames are variables that change what later commands run or
// where they read and write: the command search path, the shell's start-up
// files and prompts, the loader's and interpreters' search paths, pagers
// and editors that tools start, and the directory variables that ~ and cd
// follow.
var dangerousNames = sync.OnceValue(func() map[string]bool {
	return map[string]bool{
		"PATH": true, "HOME": true, "IFS": true, "ENV": true, "CDPATH": true, "GLOBIGNORE": true,
		"SHELLOPTS": true, "PROMPT_COMMAND": true, "PAGER": true, "MANPAGER": true, "EDITOR": true,
		"VISUAL": true, "BROWSER": true, "SHELL": true, "PWD": true, "OLDPWD": true, "HISTFILE": true,
		"INPUTRC": true, "ZDOTDIR": true, "SSH_ASKPASS": true, "SUDO_ASKPASS": true, "CC": true,
		"CXX": true, "CPP": true, "LD": true, "AR": true, "MAKEFLAGS": true, "MFLAGS": true,
		"MAKEFILES": true, "GCONV_PATH": true, "LOCPATH": true, "NLSPATH": true, "HOSTALIASES": true,
		"TMPDIR": true, "EXECIGNORE": true, "TERMINFO": true, "RUSTFLAGS": true, "TAR_OPTIONS": true,
	}
})

// dangerousPrefixes are families of such variables: LD_PRELOAD and the
// loader's, GIT_SSH and git's, BASH_ENV and PS4 and bash's own, exported
// functions, and interpreters' and build tools' option variables.
var dangerousPrefixes = []string{
	"LD_", "DYLD_", "GIT_", "BASH", "PS", "PYTHON", "PERL", "RUBY", "NODE_", "NPM_CONFIG_",
	"npm_config_", "CARGO", "RUSTC", "GO", "JAVA", "_JAVA", "LESS", "XDG_", "DOCKER_", "SSH_",
}

// DangerousName reports whether assigning the variable may change what
// later commands run or where they write (PATH, LD_PRELOAD, GIT_DIR,
// BASH_ENV …): a command assigning one is granted only exactly.
func DangerousName(name string) bool {
	if dangerousNames()[name] {
		return true
	}
	for _, p := range dangerousPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}
