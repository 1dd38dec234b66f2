package shell

import (
	"path"
	"strings"
	"sync"
)

// Why a command is granted only exactly as asked: its arguments decide
// what it runs or writes, so a grant for its name and " *" would cover
// anything.
const (
	exactRuns      = "runs another command or a script"
	exactShell     = "changes the shell's state for later commands"
	exactInterp    = "an interpreter: its arguments are a program"
	exactExec      = "has an option or command that runs a program"
	exactRemote    = "runs commands on another machine or as another user"
	exactArchive   = "writes the files an archive or a patch names (.git/ included)"
	exactEditor    = "a pager or editor that can run shell commands"
	exactGitConfig = "changes or bypasses git's configuration, which runs programs"
	exactContainer = "runs a container with the host's mounts and devices"
	exactSchedule  = "schedules commands to run later"
)

// exactOnly are the commands (by name, or by their naming words) granted
// only exactly, with the reason: the wrappers, shells and interpreters
// (see wrappers and interpreters) and these. Listed in
// docs/ARCHITECTURE.md.
var exactOnly = sync.OnceValue(func() map[string]string {
	return map[string]string{
		// The shell's own state.
		"alias": exactShell, "unalias": exactShell, "set": exactShell, "shopt": exactShell,
		"declare": exactShell, "typeset": exactShell, "local": exactShell, "export": exactShell,
		"readonly": exactShell, "unset": exactShell, "hash": exactShell, "enable": exactShell,
		"complete": exactShell, "bind": exactShell, "trap": exactShell, "eval": exactRuns,
		"source": exactRuns, ".": exactRuns, "let": exactShell,
		// Programs that run programs.
		"tar": exactExec, "bsdtar": exactExec, "zip": exactExec, "rsync": exactExec,
		"sed": exactInterp, "gdb": exactExec, "lldb": exactExec, "valgrind": exactRuns,
		"tmux": exactRuns, "screen": exactRuns, "xdg-open": exactRuns, "entr": exactRuns,
		"ssh": exactRemote, "scp": exactRemote, "sftp": exactRemote, "mosh": exactRemote,
		"unzip": exactArchive, "cpio": exactArchive, "7z": exactArchive, "7za": exactArchive,
		"patch": exactArchive, "git apply": exactArchive, "git am": exactArchive,
		"less": exactEditor, "more": exactEditor, "most": exactEditor, "man": exactEditor,
		"vi": exactEditor, "vim": exactEditor, "nvim": exactEditor, "view": exactEditor,
		"vimdiff": exactEditor, "ex": exactEditor, "ed": exactEditor, "emacs": exactEditor,
		"at": exactSchedule, "batch": exactSchedule, "crontab": exactSchedule,
		// git subcommands that run programs or rewrite the configuration.
		"git config": exactGitConfig, "git submodule": exactExec, "git bisect": exactExec,
		"git difftool": exactExec, "git mergetool": exactExec, "git filter-branch": exactExec,
		"git clone": exactGitConfig, "git send-email": exactExec, "git instaweb": exactExec,
		"git daemon": exactExec, "git credential": exactExec, "git hook": exactExec,
		// Containers.
		"docker run": exactContainer, "docker exec": exactContainer, "docker create": exactContainer,
		"docker container": exactContainer, "podman run": exactContainer, "podman exec": exactContainer,
		"podman create": exactContainer, "podman container": exactContainer,
		"deno run": exactInterp, "deno eval": exactInterp, "deno repl": exactInterp,
		"npm exec": exactRuns, "pnpm exec": exactRuns,
	}
})

// riskyOptions are options that make a command that is otherwise granted
// by its name run a program, or read a configuration that can: present,
// or possibly hidden in a word known only at run time, the command is
// granted only exactly. "--long" entries match their
// abbreviations too (getopt and git accept unique prefixes), "-x" entries
// a letter in a cluster of short options, "-word" entries a Go-style flag,
// and entries ending in "=" an argument starting with them.
var riskyOptions = sync.OnceValue(func() map[string][]string {
	return map[string][]string{
		"git push":      {"--receive-pack", "--exec"},
		"git fetch":     {"--upload-pack"},
		"git pull":      {"--upload-pack"},
		"git ls-remote": {"--upload-pack", "--exec"},
		"git archive":   {"--exec", "--remote"},
		"git grep":      {"-O", "--open-files-in-pager"},
		"git rebase":    {"-x", "--exec"},
		"git init":      {"--template", "--separate-git-dir"},
		"sort":          {"--compress-program"},
		"go":            {"-exec", "-toolexec", "-vettool"},
		"curl":          {"-K", "--config"},
		"wget":          {"-e", "--execute", "--use-askpass"},
		"npm":           {"--script-shell", "--node-options"},
		"pnpm":          {"--script-shell", "--node-options"},
		"yarn":          {"--script-shell"},
		"cargo":         {"--config", "-Z"},
		"cp":            {"-r", "-R", "-a", "--recursive", "--archive"},
		"find":          {"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"},
		"make":          {"-E", "--eval", "SHELL=", ".SHELLFLAGS=", "MAKESHELL="},
	}
})

// interpreter says where a program of a shell or interpreter comes from.
type interpreter struct {
	prog  string   // short options whose value is the program (-c, -e)
	value string   // other short options that take the next word
	stdin string   // short options that make it read the program from its input
	long  []string // long options whose value is the program
	// operand is set when the first operand is the program or its file;
	// otherwise operands are data (at's time) and the program is read
	// from the input unless an option gives it.
	operand bool
	// always: it reads commands from its input whatever its arguments
	// (sqlite3, ed).
	always bool
	// shell: a shell, whose program Parse reads as commands of its own.
	shell bool
}

var (
	shellInterp  = interpreter{prog: "c", value: "oO", stdin: "s", operand: true, shell: true}
	pythonInterp = interpreter{prog: "cm", value: "WX", operand: true}
	nodeInterp   = interpreter{prog: "ep", value: "r", long: []string{"--eval", "--print"}, operand: true}
	awkInterp    = interpreter{prog: "f", value: "vF", operand: true}
	readsAlways  = interpreter{always: true}
)

// interpreters run a program given in their arguments, in a file, or
// read from their input. They are granted only exactly; a here-document
// or here-string they read is part of their pattern; and one reading its
// program from a pipe or a file is judged as running unknown code.
var interpreters = sync.OnceValue(func() map[string]interpreter {
	return map[string]interpreter{
		"sh": shellInterp, "bash": shellInterp, "dash": shellInterp, "ksh": shellInterp,
		"mksh": shellInterp, "zsh": shellInterp, "ash": shellInterp, "yash": shellInterp,
		"fish": shellInterp, "csh": shellInterp, "tcsh": shellInterp,
		"python": pythonInterp, "pypy": pythonInterp, "node": nodeInterp, "nodejs": nodeInterp,
		"perl": {prog: "eE", value: "I", operand: true}, "ruby": {prog: "e", value: "Ir", operand: true},
		"php": {prog: "rfBRFE", value: "cdz", operand: true}, "lua": {prog: "e", value: "l", operand: true},
		"luajit": {prog: "e", value: "l", operand: true}, "Rscript": {prog: "e", operand: true},
		"R": {prog: "ef"}, "julia": {prog: "eE", operand: true}, "tclsh": {operand: true},
		"wish": {operand: true}, "expect": {prog: "c", operand: true}, "osascript": {prog: "e", operand: true},
		"guile": {prog: "c", operand: true}, "irb": {operand: true}, "jshell": {operand: true},
		"awk": awkInterp, "gawk": awkInterp, "mawk": awkInterp, "nawk": awkInterp,
		"dc": {prog: "ef", operand: true}, "m4": {operand: true}, "gnuplot": {prog: "e", operand: true},
		"at": {prog: "f", value: "qtM"}, "batch": {prog: "f", value: "q"}, "crontab": {value: "u", operand: true},
		"sqlite3": readsAlways, "duckdb": readsAlways, "ed": readsAlways, "ex": readsAlways,
		"psql": {prog: "cf", value: "dhpUv"}, "mysql": {prog: "e", value: "uhpPD"},
		"mariadb": {prog: "e", value: "uhpPD"},
	}
})

// interpreterOf is the interpreter a command name runs, by its base name,
// with version suffixes dropped (python3.12, pypy3).
func interpreterOf(name string) (interpreter, bool) {
	base := baseName(name)
	if in, ok := interpreters()[base]; ok {
		return in, true
	}
	for _, family := range []string{"python", "pypy", "node", "perl", "ruby", "php", "lua"} {
		if strings.HasPrefix(base, family) && strings.Trim(base[len(family):], "0123456789.-") == "" {
			return interpreters()[family], true
		}
	}
	return interpreter{}, false
}

// readsProgram reports whether a command of in takes its program from its
// input: no option or operand names it.
func (in interpreter) readsProgram(args []string) bool {
	if in.always {
		return true
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-" || stdinFile(a):
			return true
		case a == "--":
			return !in.operand || i+1 == len(args) || stdinFile(args[i+1])
		case strings.HasPrefix(a, "--"):
			name, _, _ := strings.Cut(a, "=")
			for _, l := range in.long {
				if name == l {
					return false
				}
			}
		case strings.HasPrefix(a, "-") || strings.HasPrefix(a, "+"):
			given, skip, stdin := in.short(a[1:])
			if given || stdin {
				return stdin
			}
			i += skip
		default:
			return !in.operand
		}
	}
	return true
}

// stdinFile reports the names of a process's own input: a program read
// from one of them comes from the pipe.
func stdinFile(p string) bool {
	switch p {
	case "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0", "/dev/tty":
		return true
	}
	return false
}

// short reads a cluster of short options: whether one gives the program,
// how many following words are its value, whether one asks for the input.
func (in interpreter) short(cluster string) (given bool, skip int, stdin bool) {
	for j, r := range cluster {
		switch {
		case strings.ContainsRune(in.prog, r):
			return true, 0, false
		case strings.ContainsRune(in.stdin, r):
			return false, 0, true
		case strings.ContainsRune(in.value, r):
			if j == len(cluster)-1 {
				return false, 1, false
			}
			return false, 0, false
		}
	}
	return false, 0, false
}

// risky reports whether an argument is one of the options of riskyOptions.
func risky(arg, opt string) bool {
	switch {
	case strings.HasSuffix(opt, "="):
		return strings.HasPrefix(arg, opt)
	case strings.HasPrefix(opt, "--"):
		name, _, _ := strings.Cut(arg, "=")
		return strings.HasPrefix(name, "--") && len(name) >= 3 && strings.HasPrefix(opt, name)
	case len(opt) > 2:
		name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		return strings.HasPrefix(arg, "-") && name == opt[1:]
	default:
		return strings.HasPrefix(arg, "-") && !strings.HasPrefix(arg, "--") && strings.Contains(arg[1:], opt[1:])
	}
}

// baseName is a command's name without its directory: /usr/bin/rm is rm.
func baseName(name string) string {
	if !strings.Contains(name, "/") {
		return name
	}
	return path.Base(name)
}
