package shell

import (
	"strings"
)

// arity is how many leading words name what a command does, for the
// commands whose first word alone says too little: "git status", "npm run
// build". The longest matching prefix wins; a command not listed is named
// by its first word.
var arity = map[string]int{
	"apt": 2, "apt-get": 2, "brew": 2, "bun": 2, "bun run": 3, "bun x": 3,
	"bundle": 2, "bundle exec": 3, "cargo": 2, "cmake": 2, "composer": 2,
	"deno": 2, "deno task": 3, "docker": 2, "docker compose": 3,
	"docker container": 3, "docker image": 3, "docker network": 3,
	"docker volume": 3, "dotnet": 2, "gh": 3, "git": 2, "git config": 3,
	"git remote": 3, "git stash": 3, "git submodule": 3, "git worktree": 3,
	"go": 2, "go mod": 3, "go tool": 3, "gradle": 2, "helm": 2, "java": 2,
	"kubectl": 2, "make": 2, "mvn": 2, "node": 2, "npm": 2, "npm exec": 3,
	"npm run": 3, "npx": 2, "pip": 2, "pip3": 2, "pnpm": 2, "pnpm dlx": 3,
	"pnpm exec": 3, "pnpm run": 3, "poetry": 2, "poetry run": 3,
	"python": 2, "python3": 2, "rustup": 2, "swift": 2, "systemctl": 2,
	"terraform": 2, "tmux": 2, "uv": 2, "uv run": 3, "yarn": 2,
	"yarn dlx": 3, "yarn run": 3,
}

// runsOthers are commands that run other commands, change the environment
// of later ones, or reach another machine: a grant for one of them covers
// exactly the command as written, never a pattern.
var runsOthers = map[string]bool{
	".": true, "alias": true, "bash": true, "builtin": true, "busybox": true,
	"chroot": true, "command": true, "dash": true, "declare": true,
	"doas": true, "env": true, "eval": true, "exec": true, "export": true,
	"fish": true, "flock": true, "ionice": true, "ksh": true, "local": true,
	"nice": true, "nohup": true, "nsenter": true, "parallel": true,
	"readonly": true, "runuser": true, "script": true, "set": true,
	"setsid": true, "sh": true, "shopt": true, "source": true, "ssh": true,
	"stdbuf": true, "strace": true, "su": true, "sudo": true,
	"timeout": true, "trap": true, "typeset": true, "unalias": true,
	"unset": true, "unshare": true, "watch": true, "xargs": true,
	"zsh": true,
}

// shells run the script given after -c.
var shells = map[string]bool{"bash": true, "sh": true, "zsh": true, "dash": true, "ksh": true}

// Grant is the pattern an "always" answer may store for c: its known
// arity's words and " *" ("git status *"), the exact command where a
// pattern would allow more than was asked (commands that run others, find
// -exec, assignments, flags among the naming words), or "" where nothing
// may be stored because what runs is only known at run time.
func (c Command) Grant() string {
	if len(c.Words) == 0 || c.Dynamic[0] {
		return ""
	}
	name := c.Words[0]
	if c.Assigns || runsOthers[name] || name == "find" && findRuns(c.Words) {
		return c.exact()
	}
	n := c.arity()
	for i := range n {
		if c.Dynamic[i] || !plain(c.Words[i]) || i > 0 && strings.HasPrefix(c.Words[i], "-") {
			return c.exact()
		}
	}
	return strings.Join(c.Words[:n], " ") + " *"
}

// exact is c's own text as a grant, when every word is literal and the
// text holds no wildcard that would let it match other commands.
func (c Command) exact() string {
	for _, d := range c.Dynamic {
		if d {
			return ""
		}
	}
	if strings.ContainsAny(c.Pattern, "*?") {
		return ""
	}
	return c.Pattern
}

func (c Command) arity() int {
	n := 1
	for l := min(len(c.Words), 3); l > 0; l-- {
		if a, ok := arity[strings.Join(c.Words[:l], " ")]; ok {
			n = a
			break
		}
	}
	return min(n, len(c.Words))
}

// plain reports whether a word can stand in a grant as it is: no
// wildcard, quote, expansion or space.
func plain(w string) bool {
	if w == "" {
		return false
	}
	for _, r := range w {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("_-./@:+=,%", r):
		default:
			return false
		}
	}
	return true
}

func findRuns(words []string) bool {
	for _, w := range words[1:] {
		switch w {
		case "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls":
			return true
		}
	}
	return false
}

// script is the literal script c hands to a shell (bash -c '…') or to
// eval, which Parse reads as commands of its own.
func (c Command) script() (string, bool) {
	if len(c.Words) < 2 || c.Dynamic[0] {
		return "", false
	}
	if c.Words[0] == "eval" {
		for _, d := range c.Dynamic[1:] {
			if d {
				return "", false
			}
		}
		return strings.Join(c.Words[1:], " "), true
	}
	if !shells[c.Words[0]] {
		return "", false
	}
	for i := 1; i < len(c.Words)-1; i++ {
		w := c.Words[i]
		if c.Dynamic[i] || !strings.HasPrefix(w, "-") || strings.HasPrefix(w, "--") {
			continue
		}
		if strings.Contains(w, "c") {
			if c.Dynamic[i+1] {
				return "", false
			}
			return c.Words[i+1], true
		}
	}
	return "", false
}
