package shell

import (
	"os/user"
	"path/filepath"
	"slices"
)

// maxDirs bounds the directories a script is followed into with cd; a
// script that may be in more is judged as a whole.
const maxDirs = 16

// maxScriptExpansions bounds the strings all the words of a script are
// expanded to; past it, words are left unexpanded, like those known only
// at run time.
const maxScriptExpansions = 8192

// Env is what Parse is told of where a script will run.
type Env struct {
	// Dir is the absolute directory the script starts in; "" leaves the
	// commands' directories relative to it.
	Dir string
	// Var looks up a variable of the environment the script starts with;
	// nil when it is not known (variables the script does not set are then
	// only known at run time).
	Var func(name string) (string, bool)
}

// scope is what the walk knows, at a point of the script, of the shell's
// variables and directory. It over-approximates: a variable assigned in
// one branch keeps its earlier values too, and a cd adds a directory
// rather than replacing one, so that every place a command may run is
// judged.
type scope struct {
	env  Env
	vars map[string]*variable
	dirs []string
	// lost is set once a command may have set any variable (source, eval
	// of run-time text): variables are then only known at run time.
	lost bool
	// overflow is set when the directories could no longer be followed.
	overflow bool
	// budget is what is left of the strings the whole script may expand
	// to (shared with the subshells' scopes): a script of many brace
	// expansions is not multiplied without end.
	budget *int
}

// variable is what a variable may hold: values, or known only at run time.
type variable struct {
	vals    []string
	unknown bool
}

func newScope(env Env) *scope {
	budget := maxScriptExpansions
	sc := &scope{env: env, vars: map[string]*variable{}, dirs: []string{env.Dir}, budget: &budget}
	sc.vars["PWD"] = &variable{vals: []string{env.Dir}, unknown: env.Dir == ""}
	return sc
}

// clone is the scope of a subshell: what it changes stays there.
func (sc *scope) clone() *scope {
	cp := *sc
	cp.vars = make(map[string]*variable, len(sc.vars))
	for k, v := range sc.vars {
		cp.vars[k] = &variable{vals: slices.Clone(v.vals), unknown: v.unknown}
	}
	cp.dirs = slices.Clone(sc.dirs)
	return &cp
}

// lookup is the values a variable may have, or false when it is only
// known at run time. A variable neither the script nor the environment
// sets expands to "".
func (sc *scope) lookup(name string) ([]string, bool) {
	if v, ok := sc.vars[name]; ok {
		return v.vals, !v.unknown && !sc.lost
	}
	if sc.lost || sc.env.Var == nil {
		return nil, false
	}
	val, _ := sc.env.Var(name)
	return []string{val}, true
}

// assign records that name may now hold vals (ok false: a value known
// only at run time). The values it may have held before are kept.
func (sc *scope) assign(name string, vals []string, ok bool) {
	v, seen := sc.vars[name]
	if !seen {
		old, known := sc.lookup(name)
		v = &variable{vals: slices.Clone(old), unknown: !known}
		sc.vars[name] = v
	}
	if !ok {
		v.unknown = true
		return
	}
	for _, x := range vals {
		if !slices.Contains(v.vals, x) {
			v.vals = append(v.vals, x)
		}
	}
}

// cd records a change of directory to one of targets (resolved against
// each directory the script may be in). Where the command after it runs
// only if the cd succeeded (replace: an element of an && chain), the
// directories are those the cd leads to; otherwise they are added, since
// a cd that fails leaves the shell where it was. A target known only at
// run time is not followed (see the package documentation).
func (sc *scope) cd(targets []string, replace bool) {
	old := slices.Clone(sc.dirs)
	var next []string
	for _, d := range old {
		for _, t := range targets {
			n := t
			if !filepath.IsAbs(t) {
				n = filepath.Join(d, t)
			}
			if !slices.Contains(next, n) {
				next = append(next, n)
			}
		}
	}
	if !replace {
		next = union(old, next)
	}
	if len(next) > maxDirs {
		sc.overflow = true
		return
	}
	sc.dirs = next
	sc.assign("OLDPWD", old, true)
	sc.assign("PWD", sc.dirs, sc.env.Dir != "")
}

// union adds the directories of before that dirs lacks (after an && chain
// that may have stopped before its cd).
func union(before, dirs []string) []string {
	out := slices.Clone(before)
	for _, d := range dirs {
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// userHome is the home directory of a user named in ~user, "" when there
// is no such user.
func userHome(name string) string {
	u, err := user.Lookup(name)
	if err != nil {
		return ""
	}
	return u.HomeDir
}
