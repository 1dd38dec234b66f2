package builtin

import (
	"encoding/json"
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentd/agentd/internal/shell"
	"github.com/agentd/agentd/internal/tool"
)

// Needs implements tool.Permissioned. A command is judged by its parts:
// every simple command it would run (in lists, pipelines, subshells,
// substitutions and the literal scripts of bash -c and eval) is a pattern
// of the bash permission on its own, an "always" answer stores each
// part's grant (its known arity's words and " *", or the exact command
// where a pattern would allow more), files it writes through redirections
// need edit, and paths outside the workspace, in arguments or
// redirections, need external_directory. A command that does not parse
// asks whatever the rules say.
func (Bash) Needs(call tool.Call) []tool.Need {
	var in struct {
		Command     string `json:"command"`
		Workdir     string `json:"workdir"`
		Description string `json:"description"`
	}
	if json.Unmarshal(call.Input, &in) != nil || in.Command == "" {
		return nil
	}
	needs := externalNeed(call, in.Workdir, false)
	md := map[string]any{"command": in.Command, "description": in.Description}
	ask := tool.Need{Permission: "bash", Always: []string{}, Title: in.Command, Metadata: md}
	script, err := shell.Parse(in.Command)
	if err != nil {
		ask.Patterns, ask.Ask = []string{in.Command}, true
		md["parseError"] = err.Error()
		return append(needs, ask)
	}
	dir := call.Directory
	if in.Workdir != "" {
		if d, err := Resolve(call.Directory, in.Workdir); err == nil || errors.Is(err, ErrOutside) {
			dir = d
		}
	}
	var outside, edits []string
	for _, c := range script.Commands {
		ask.Patterns = appendNew(ask.Patterns, c.Pattern)
		g := c.Grant()
		if g != "" {
			ask.Always = appendNew(ask.Always, g)
		}
		if !strings.HasSuffix(g, " *") {
			ask.Exact = appendNew(ask.Exact, c.Pattern)
		}
		for _, p := range pathArgs(c) {
			if d, out := outsideDir(call, dir, p); out {
				outside = appendNew(outside, d)
			}
		}
	}
	for _, r := range script.Redirects {
		if r.Target == "" {
			// Where it writes is known only at run time: a pattern that
			// no grant matches, so it asks unless the operator allows
			// every command.
			ask.Patterns = appendNew(ask.Patterns, "> "+r.Text)
			ask.Exact = appendNew(ask.Exact, "> "+r.Text)
			continue
		}
		if deviceFile(r.Target) {
			continue
		}
		if d, out := outsideDir(call, dir, r.Target); out {
			outside = appendNew(outside, d)
		} else if r.Write {
			abs, err := Resolve(call.Directory, join(dir, r.Target))
			if err == nil {
				edits = appendNew(edits, rel(call.Directory, abs))
			}
		}
	}
	if len(outside) > 0 {
		var always []string
		for _, d := range outside {
			always = append(always, d, d+"/*")
		}
		needs = append(needs, tool.Need{Permission: "external_directory", Patterns: outside, Always: always,
			Title: "Access " + strings.Join(outside, ", ") + " outside the workspace", Metadata: map[string]any{"command": in.Command}})
	}
	for _, e := range edits {
		needs = append(needs, tool.Need{Permission: "edit", Patterns: []string{e}, Always: []string{"*"}, Title: "edit " + e})
	}
	if len(ask.Patterns) > 0 {
		needs = append(needs, ask)
	}
	return needs
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// pathArgs are a command's literal arguments that name a place outside
// the current directory's subtree when they are paths: absolute, from the
// home directory, or climbing with "..". An option's value (--out=/x)
// counts too. Other words are left alone: most arguments are not paths.
func pathArgs(c shell.Command) []string {
	var out []string
	for i, w := range c.Words {
		if i == 0 || c.Dynamic[i] {
			continue
		}
		if strings.HasPrefix(w, "-") {
			_, v, ok := strings.Cut(w, "=")
			if !ok {
				continue
			}
			w = v
		}
		if strings.HasPrefix(w, "/") || strings.HasPrefix(w, "~") || w == ".." ||
			strings.HasPrefix(w, "../") || strings.Contains(w, "/../") || strings.HasSuffix(w, "/..") {
			out = append(out, w)
		}
	}
	return out
}

// deviceFile reports the device files commands commonly read and write
// that hold nothing of the machine's.
func deviceFile(p string) bool {
	switch p {
	case "/dev/null", "/dev/zero", "/dev/stdin", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/random", "/dev/urandom":
		return true
	}
	return false
}

// join resolves p against the command's directory, expanding a leading
// "~" or "~user" as bash would.
func join(dir, p string) string {
	if strings.HasPrefix(p, "~") {
		name, rest, _ := strings.Cut(p[1:], "/")
		home := ""
		if name == "" {
			home, _ = os.UserHomeDir()
		} else if u, err := user.Lookup(name); err == nil {
			home = u.HomeDir
		}
		if home != "" {
			return filepath.Join(home, rest)
		}
	}
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// outsideDir reports whether p, from dir, lands outside the workspace, and
// the directory a grant would name.
func outsideDir(call tool.Call, dir, p string) (string, bool) {
	if deviceFile(p) {
		return "", false
	}
	abs, err := Resolve(call.Directory, join(dir, p))
	if !errors.Is(err, ErrOutside) || inReadDirs(call, abs) {
		return "", false
	}
	if strings.ContainsAny(filepath.Base(abs), "*?[") || !isDir(abs) {
		abs = filepath.Dir(abs)
	}
	return abs, true
}
