package shell

import (
	"slices"
	"strings"
	"sync"
)

// wrapper says how a command that runs another finds it in its words.
type wrapper struct {
	value string   // short options that take the next word as their value
	long  []string // long options that take the next word (unless given with =)
	// skip is how many operands come before the command (timeout's
	// duration, chroot's directory).
	skip int
	// assigns: NAME=value words may come before the command (env, sudo).
	assigns bool
	// script is the short option whose value is a shell script (su -c,
	// env -S); join: the command's words are joined into one (watch).
	script string
	join   bool
	// none are options after which nothing is run (command -v).
	none string
	// feeds: the command gets arguments known only at run time (xargs).
	feeds bool
	// noCommand: operands are not a command (su's user), only script runs.
	noCommand bool
}

// wrappers are the commands that run the command in their words: each is
// granted only exactly, and the command it runs is judged too (so that a
// deny rule on "rm *" holds for "nice rm", "env rm", "timeout 5 rm").
var wrappers = sync.OnceValue(func() map[string]wrapper {
	return map[string]wrapper{
		"builtin": {}, "nohup": {}, "setsid": {}, "unbuffer": {}, "catchsegv": {}, "setpriv": {},
		"command":     {none: "vV"},
		"exec":        {value: "a"},
		"time":        {value: "fo", long: []string{"--format", "--output"}},
		"busybox":     {},
		"env":         {value: "uCS", long: []string{"--unset", "--chdir", "--split-string"}, assigns: true, script: "S"},
		"nice":        {value: "n", long: []string{"--adjustment"}},
		"ionice":      {value: "cnpPu", long: []string{"--class", "--classdata", "--pid", "--pgid", "--uid"}},
		"stdbuf":      {value: "ioe", long: []string{"--input", "--output", "--error"}},
		"timeout":     {value: "sk", long: []string{"--signal", "--kill-after"}, skip: 1},
		"chroot":      {skip: 1},
		"flock":       {value: "wEc", long: []string{"--timeout", "--conflict-exit-code", "--command"}, skip: 1, script: "c"},
		"sudo":        {value: "ugCDhprtUT", long: []string{"--user", "--group", "--chdir", "--host", "--prompt", "--role", "--type", "--other-user", "--close-from", "--command-timeout"}, assigns: true},
		"doas":        {value: "uC"},
		"pkexec":      {long: []string{"--user"}},
		"su":          {value: "cgGsw", long: []string{"--command", "--group", "--shell"}, script: "c", noCommand: true},
		"runuser":     {value: "ugcGsw", long: []string{"--user", "--group", "--command", "--shell"}, script: "c"},
		"sg":          {skip: 1, script: "c"},
		"script":      {value: "cEIOTBm", long: []string{"--command", "--log-io", "--log-in", "--log-out", "--log-timing"}, script: "c", noCommand: true},
		"watch":       {value: "ndq", long: []string{"--interval", "--differences", "--equexit"}, join: true},
		"xargs":       {value: "adEILnPs", long: []string{"--arg-file", "--delimiter", "--max-lines", "--max-args", "--max-procs", "--max-chars", "--process-slot-var"}, feeds: true},
		"parallel":    {value: "jSIXEdnNPs", long: []string{"--jobs", "--sshlogin", "--delimiter", "--arg-file", "--max-args"}, feeds: true},
		"strace":      {value: "eoOpPsSuEIabX"},
		"ltrace":      {value: "eopsunAlS"},
		"taskset":     {skip: 1},
		"chrt":        {skip: 1},
		"prlimit":     {value: "p"},
		"nsenter":     {value: "tSGw"},
		"unshare":     {value: "SGRw"},
		"fakeroot":    {value: "lsi"},
		"faketime":    {value: "f", skip: 1},
		"firejail":    {},
		"caffeinate":  {value: "tw"},
		"systemd-run": {value: "upEMHs", long: []string{"--unit", "--property", "--setenv", "--machine", "--host", "--working-directory", "--uid", "--gid", "--nice"}},
		"ssh-agent":   {value: "aEPt"},
		"dbus-launch": {},
	}
})

// unwrapped is what a wrapper runs: the command's words (from, into c's
// words; -1 when none) and a script it is given to run.
type unwrapped struct {
	from   int
	script string
	hasScr bool
	feeds  bool
}

// unwrap finds the command a wrapper runs. Words that are known only at
// run time stop the search: what runs is then unknown, which the wrapper's
// own pattern (granted only exactly) already says.
func (c Command) unwrap() (unwrapped, bool) {
	if len(c.Words) == 0 || c.Dynamic[0] {
		return unwrapped{}, false
	}
	name := baseName(c.Words[0])
	if name == "find" {
		return c.findExec()
	}
	w, ok := wrappers()[name]
	if !ok {
		return unwrapped{}, false
	}
	out := unwrapped{from: -1, feeds: w.feeds}
	skip := w.skip
	for i := 1; i < len(c.Words); i++ {
		a := c.Words[i]
		switch {
		case c.Dynamic[i]:
			return out, true
		case a == "--":
			return w.command(c, i+1, out), true
		case strings.HasPrefix(a, "--"):
			i += w.longOption(c, i, &out)
		case strings.HasPrefix(a, "-") && len(a) > 1:
			n, stop := w.short(c, i, &out)
			if stop {
				return out, true
			}
			i += n
		case w.assigns && strings.Contains(a, "=") && isName(strings.SplitN(a, "=", 2)[0]):
		case skip > 0:
			skip--
		default:
			return w.command(c, i, out), true
		}
	}
	return out, true
}

// longOption reads the long option at word i: how many words its value takes,
// and the script it gives (su --command, env --split-string).
func (w wrapper) longOption(c Command, i int, out *unwrapped) int {
	n, v, eq := strings.Cut(c.Words[i], "=")
	next := i+1 < len(c.Words) && !c.Dynamic[i+1]
	if w.script == "c" && n == "--command" || w.script == "S" && n == "--split-string" {
		if eq {
			out.script, out.hasScr = v, true
		} else if next {
			out.script, out.hasScr = c.Words[i+1], true
		}
	}
	if !eq && slices.Contains(w.long, n) {
		return 1
	}
	return 0
}

// command is out with the wrapped command starting at word i, when the
// wrapper runs one.
func (w wrapper) command(c Command, i int, out unwrapped) unwrapped {
	if w.noCommand || i >= len(c.Words) {
		return out
	}
	if w.join {
		out.script, out.hasScr = strings.Join(c.Words[i:], " "), !slices.Contains(c.Dynamic[i:], true)
		return out
	}
	out.from = i
	return out
}

// short reads the cluster of short options at word i: how many words its
// value takes, and whether nothing is run after it.
func (w wrapper) short(c Command, i int, out *unwrapped) (int, bool) {
	cluster := c.Words[i][1:]
	for j, r := range cluster {
		if strings.ContainsRune(w.none, r) {
			return 0, true
		}
		if !strings.ContainsRune(w.value, r) {
			continue
		}
		val, n := cluster[j+1:], 0
		if val == "" {
			if i+1 >= len(c.Words) || c.Dynamic[i+1] {
				return 1, false
			}
			val, n = c.Words[i+1], 1
		}
		if w.script != "" && strings.ContainsRune(w.script, r) {
			out.script, out.hasScr = val, true
		}
		return n, false
	}
	return 0, false
}

// findExec finds the command of find's -exec, -execdir, -ok and -okdir,
// which runs with find's file names as arguments.
func (c Command) findExec() (unwrapped, bool) {
	for i, w := range c.Words {
		switch w {
		case "-exec", "-execdir", "-ok", "-okdir":
			if i+1 < len(c.Words) && !c.Dynamic[i+1] {
				return unwrapped{from: i + 1, feeds: true}, true
			}
			return unwrapped{from: -1}, true
		}
	}
	return unwrapped{}, false
}

// inner is the command a wrapper runs, as a Command of its own: its
// words up to the end (or find's ";" or "+"), judged as Wrapped.
func (c Command) inner(from int) Command {
	end := len(c.Words)
	if baseName(c.Words[0]) == "find" {
		for j := from; j < len(c.Words); j++ {
			if c.Words[j] == ";" || c.Words[j] == "+" {
				end = j
				break
			}
		}
	}
	in := Command{Words: slices.Clone(c.Words[from:end]), Dynamic: slices.Clone(c.Dynamic[from:end]),
		raw: slices.Clone(c.raw[from:end]), exp: slices.Clone(c.exp[from:end]), Wrapped: true, Dirs: c.Dirs}
	in.Text = joinWords(in.raw)
	in.Pattern = joinWords(in.patternWords())
	return in
}

// script is the literal script c hands to a shell (bash -c '…'), to eval,
// or to trap, which Parse reads as commands of their own; eval's and
// trap's run in the same shell (shared reports it).
func (c Command) script() (src string, shared, ok bool) {
	if len(c.Words) < 2 || c.Dynamic[0] {
		return "", false, false
	}
	switch baseName(c.Words[0]) {
	case "eval":
		if slices.Contains(c.Dynamic[1:], true) {
			return "", false, false
		}
		return strings.Join(c.Words[1:], " "), true, true
	case "trap":
		for i := 1; i < len(c.Words); i++ {
			if c.Words[i] == "--" || strings.HasPrefix(c.Words[i], "-") {
				continue
			}
			return c.Words[i], true, !c.Dynamic[i]
		}
		return "", false, false
	}
	if i := c.shellScript(); i > 0 && !c.Dynamic[i] {
		return c.Words[i], false, true
	}
	return "", false, false
}

// shellScript is the index of the word holding the script of a shell's
// -c, 0 when there is none.
func (c Command) shellScript() int {
	if in, ok := interpreterOf(c.Words[0]); !ok || !in.shell {
		return 0
	}
	for i := 1; i < len(c.Words)-1; i++ {
		w := c.Words[i]
		if c.Dynamic[i] || !strings.HasPrefix(w, "-") || strings.HasPrefix(w, "--") {
			continue
		}
		if strings.Contains(w, "c") {
			return i + 1
		}
	}
	return 0
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}
