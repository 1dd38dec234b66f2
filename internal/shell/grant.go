package shell

import (
	"strings"
	"sync"
)

// arity is how many leading words name what a command does, for the
// commands whose first word alone says too little: "git status", "npm run
// build". The longest matching prefix wins; a command not listed is named
// by its first word.
var arity = sync.OnceValue(func() map[string]int {
	return map[string]int{
		"apt": 2, "apt-get": 2, "brew": 2, "bun": 2, "bun run": 3, "bun x": 3,
		"bundle": 2, "bundle exec": 3, "cargo": 2, "cmake": 2, "composer": 2,
		"deno": 2, "deno task": 3, "docker": 2, "docker compose": 3,
		"docker container": 3, "docker image": 3, "docker network": 3,
		"docker volume": 3, "dotnet": 2, "gh": 3, "git": 2, "git config": 3,
		"git remote": 3, "git stash": 3, "git submodule": 3, "git worktree": 3,
		"go": 2, "go mod": 3, "go tool": 3, "gradle": 2, "helm": 2, "java": 2,
		"kubectl": 2, "make": 2, "mvn": 2, "npm": 2, "npm exec": 3,
		"npm run": 3, "npx": 2, "pip": 2, "pip3": 2, "pnpm": 2, "pnpm dlx": 3,
		"pnpm exec": 3, "pnpm run": 3, "podman": 2, "poetry": 2, "poetry run": 3,
		"rustup": 2, "swift": 2, "systemctl": 2, "terraform": 2, "uv": 2, "uv run": 3,
		"yarn": 2, "yarn dlx": 3, "yarn run": 3,
	}
})

// Grant is the pattern an "always" answer may store for c: its known
// arity's words and " *" ("git status *"); the exact command where a
// pattern would allow more than was asked (see ExactOnly); or "" where
// nothing may be stored because what runs is only known at run time
// (Opaque, a dynamic name or word of an exact-only command, a run-time
// value for PATH or its kin).
func (c Command) Grant() string {
	switch {
	case len(c.Words) == 0 || c.Opaque != "" || c.varies:
		return ""
	case c.Assignment:
		return c.assignGrant()
	case c.Dynamic[0]:
		return ""
	case c.ExactOnly() != "":
		return c.exact()
	}
	n := c.arity()
	return strings.Join(c.Words[:n], " ") + " *"
}

// ExactOnly is why c may be granted only exactly as asked, "" when a
// grant for its naming words and " *" is safe: it is a wrapper, a shell,
// an interpreter or a command of the exact-only table, it has an option
// that runs a program, variables are assigned for it alone, or a flag or
// a word that is not plain is among its naming words.
func (c Command) ExactOnly() string {
	if len(c.Words) == 0 {
		return "no command"
	}
	if c.Assignment || c.Assigns {
		return "assigns variables"
	}
	if c.Wrapped {
		return "a wrapped command"
	}
	name := baseName(c.Words[0])
	if _, ok := wrappers()[name]; ok {
		return exactRuns
	}
	if _, ok := interpreterOf(name); ok {
		return exactInterp
	}
	words := append([]string{name}, c.Words[1:]...)
	for l := min(len(words), 3); l > 0; l-- {
		key := strings.Join(words[:l], " ")
		if why, ok := exactOnly()[key]; ok {
			return why
		}
		for _, opt := range riskyOptions()[key] {
			for i, a := range c.Words[l:] {
				if risky(a, opt) || c.Dynamic[l+i] {
					return exactExec
				}
			}
		}
	}
	for i := range c.arity() {
		if c.Dynamic[i] || !plain(c.Words[i]) || i > 0 && strings.HasPrefix(c.Words[i], "-") {
			return "a flag or a word that is not plain names it"
		}
	}
	return ""
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

// assignGrant is the grant of an assignment statement: its text exactly.
// A value that expands at run time is data, judged where it is used, so
// the text may still be granted — except for a variable that changes
// what later commands run (PATH, LD_PRELOAD …).
func (c Command) assignGrant() string {
	for i, w := range c.Words {
		name := c.raw[i]
		if !c.Dynamic[i] {
			name = w
		}
		name, _, _ = strings.Cut(name, "=")
		name = strings.TrimSuffix(name, "+")
		if c.Dynamic[i] && (DangerousName(name) || !isName(name)) {
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
		if a, ok := arity()[strings.Join(c.Words[:l], " ")]; ok {
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
