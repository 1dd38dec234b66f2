package builtin

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/agentd/agentd/internal/shell"
	"github.com/agentd/agentd/internal/tool"
)

// Needs implements tool.Permissioned. A command is judged by its parts:
// every simple command it would run (in lists, pipelines, subshells,
// substitutions, the literal scripts of bash -c and eval, and what
// wrappers such as env, nice and xargs run) is a pattern of the bash
// permission on its own; an "always" answer stores each part's grant (its
// known arity's words and " *", or the exact command where a pattern
// would allow more); a script that may run code none of its parts shows
// (arithmetic on variables, ${x@P} …), or that has no part at all, is
// also judged as a whole. Files it writes through redirections need edit
// (and edit_protected in .git/ and .agentd/), and paths outside the
// workspace, in arguments or redirections, need external_directory. A
// command that does not parse asks whatever the rules say.
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
	dir := call.Directory
	if in.Workdir != "" {
		if d, err := Resolve(call.Directory, in.Workdir); err == nil || errors.Is(err, ErrOutside) {
			dir = d
		}
	}
	script, err := shell.ParseIn(in.Command, shell.Env{Dir: dir, Var: envLookup(call.Env)})
	if err != nil {
		ask.Patterns, ask.Ask = []string{in.Command}, true
		md["parseError"] = err.Error()
		return append(needs, ask)
	}
	paths := pathJudge{call: call}
	for _, c := range script.Commands {
		addPattern(&ask, c.Pattern, c.Grant(), c.Opaque != "")
		paths.command(c)
	}
	if len(script.Opaque) > 0 || len(script.Commands) == 0 {
		// Judged as a whole, and granted only as a whole: what it runs is
		// not all in its parts.
		whole := ""
		if len(script.Opaque) == 0 && !strings.ContainsAny(in.Command, "*?") {
			whole = in.Command
		}
		addPattern(&ask, in.Command, whole, len(script.Opaque) > 0)
		if len(script.Opaque) > 0 {
			md["opaque"] = script.Opaque
		}
	}
	for _, r := range script.Redirects {
		if !paths.redirect(r) {
			// Where it writes is known only at run time: a pattern that
			// no grant matches, so it asks unless the operator allows
			// every command.
			addPattern(&ask, "> "+r.Text, "", false)
		}
	}
	needs = append(needs, paths.needs(in.Command)...)
	if len(ask.Patterns) > 0 {
		needs = append(needs, ask)
	}
	return needs
}

// addPattern adds a pattern to the bash need with its grant: a pattern
// whose grant is not a prefix ("… *") is allowed only by a grant of that
// very pattern.
func addPattern(n *tool.Need, pattern, grant string, opaque bool) {
	n.Patterns = appendNew(n.Patterns, pattern)
	if grant != "" {
		n.Always = appendNew(n.Always, grant)
	}
	if !strings.HasSuffix(grant, " *") {
		n.Exact = appendNew(n.Exact, pattern)
	}
	if opaque {
		n.Opaque = appendNew(n.Opaque, pattern)
	}
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// envLookup looks variables up in the environment tools run with.
func envLookup(e *tool.Env) func(string) (string, bool) {
	var vars map[string]string
	return func(name string) (string, bool) {
		if vars == nil {
			vars = map[string]string{}
			for _, kv := range e.Environ() {
				k, v, _ := strings.Cut(kv, "=")
				vars[k] = v
			}
		}
		v, ok := vars[name]
		return v, ok
	}
}
