// Package permission evaluates opencode-style permission rules: for a
// permission key (bash, edit, read, external_directory, doom_loop …) and a
// pattern (a command, a path), the last matching rule decides between
// allow, deny and ask.
package permission

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentd/agentd/internal/core"
)

// EditProtected is the permission of writes to the workspace's .git/ and
// .agentd/ directories (by the file tools and by shell redirections),
// asked on top of edit: git runs programs its configuration and hooks
// name (core.fsmonitor, filter drivers, hooks/), so a write there is code
// execution, and .agentd/ holds agentd's own files. A grant covers only
// the very path it was asked for.
const EditProtected = "edit_protected"

// Defaults are safe for a server that can be driven over HTTP: work inside
// the workspace is allowed; shell commands (which nothing confines to the
// workspace), writes to .git/ and .agentd/, reaching outside the workspace
// and repeating the same call in a loop are asked. An operator allows bash
// in the configuration.
func Defaults() []core.Rule {
	return []core.Rule{
		{Permission: "*", Pattern: "*", Action: core.ActionAllow},
		{Permission: "bash", Pattern: "*", Action: core.ActionAsk},
		{Permission: EditProtected, Pattern: "*", Action: core.ActionAsk},
		{Permission: "external_directory", Pattern: "*", Action: core.ActionAsk},
		{Permission: "doom_loop", Pattern: "*", Action: core.ActionAsk},
	}
}

// DeniesAny reports whether one of rules denies something of permission:
// a pattern whose command cannot be checked against those rules (see
// tool.Need's Opaque) is then denied too.
func DeniesAny(rules []core.Rule, permission string) bool {
	for _, r := range rules {
		if r.Action == core.ActionDeny && Match(r.Permission, permission) {
			return true
		}
	}
	return false
}

// Decide combines the operator's rules (defaults, configuration, agent)
// with a session's: the rules its client gave may only narrow (allow to
// ask or deny, ask to deny), and rules granted by "always" answers may
// only turn an ask into allow. An operator's deny always wins.
func Decide(operator, client, granted []core.Rule, permission, pattern string) string {
	return decide(operator, client, granted, permission, pattern, false)
}

// DecideExact is Decide for a pattern that a grant allows only when it is
// that very pattern: a wildcard grant does not cover it.
func DecideExact(operator, client, granted []core.Rule, permission, pattern string) string {
	return decide(operator, client, granted, permission, pattern, true)
}

func decide(operator, client, granted []core.Rule, permission, pattern string, exact bool) string {
	op := Evaluate(operator, permission, pattern)
	if op == core.ActionDeny {
		return core.ActionDeny
	}
	if c, ok := lastMatch(client, permission, pattern); ok && stricter(c, op) {
		op = c
	}
	if op == core.ActionAsk {
		if exact {
			for _, g := range granted {
				if g.Pattern == pattern && Match(g.Permission, permission) && g.Action == core.ActionAllow {
					return core.ActionAllow
				}
			}
			return op
		}
		if g, ok := lastMatch(granted, permission, pattern); ok && g == core.ActionAllow {
			return core.ActionAllow
		}
	}
	return op
}

// lastMatch is the action of the last rule matching, if any matches.
func lastMatch(rules []core.Rule, permission, pattern string) (string, bool) {
	action, ok := "", false
	for _, r := range rules {
		if Match(r.Permission, permission) && Match(r.Pattern, pattern) {
			action, ok = r.Action, true
		}
	}
	return action, ok
}

// stricter reports whether a is stricter than b (deny > ask > allow).
func stricter(a, b string) bool {
	rank := map[string]int{core.ActionAllow: 0, core.ActionAsk: 1, core.ActionDeny: 2}
	return rank[a] > rank[b]
}

// Evaluate returns the action of the last rule matching permission and
// pattern, or allow when none does.
func Evaluate(rules []core.Rule, permission, pattern string) string {
	action := core.ActionAllow
	for _, r := range rules {
		if Match(r.Permission, permission) && Match(r.Pattern, pattern) {
			action = r.Action
		}
	}
	return action
}

// Match reports whether s matches the wildcard pattern: '*' matches any
// run of characters (slashes and spaces included), '?' exactly one. As in
// opencode, a pattern ending in " *" also matches without its arguments:
// "git status *" matches "git status".
func Match(pattern, s string) bool {
	if cmd, ok := strings.CutSuffix(pattern, " *"); ok && s == cmd {
		return true
	}
	return match(pattern, s)
}

func match(pattern, s string) bool {
	// Iterative wildcard matching with backtracking to the last star.
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == s[i]):
			p++
			i++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

func validAction(a string) bool {
	return a == core.ActionAllow || a == core.ActionDeny || a == core.ActionAsk
}

// ParseConfig reads opencode's "permission" config: one action for
// everything, or an object of permission keys whose values are an action or
// an object of pattern → action. Key order is kept, since the last match
// wins.
func ParseConfig(raw json.RawMessage) ([]core.Rule, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var single string
	if json.Unmarshal(raw, &single) == nil {
		if !validAction(single) {
			return nil, fmt.Errorf("permission: %q is not allow, deny or ask", single)
		}
		return []core.Rule{{Permission: "*", Pattern: "*", Action: single}}, nil
	}
	keys, err := orderedObject(raw)
	if err != nil {
		return nil, fmt.Errorf("permission: %w", err)
	}
	var out []core.Rule
	for _, kv := range keys {
		var action string
		if json.Unmarshal(kv.value, &action) == nil {
			if !validAction(action) {
				return nil, fmt.Errorf("permission.%s: %q is not allow, deny or ask", kv.key, action)
			}
			out = append(out, core.Rule{Permission: kv.key, Pattern: "*", Action: action})
			continue
		}
		pats, err := orderedObject(kv.value)
		if err != nil {
			return nil, fmt.Errorf("permission.%s: %w", kv.key, err)
		}
		for _, pv := range pats {
			if err := json.Unmarshal(pv.value, &action); err != nil || !validAction(action) {
				return nil, fmt.Errorf("permission.%s[%q]: want allow, deny or ask", kv.key, pv.key)
			}
			out = append(out, core.Rule{Permission: kv.key, Pattern: pv.key, Action: action})
		}
	}
	return out, nil
}

type keyValue struct {
	key   string
	value json.RawMessage
}

func orderedObject(raw json.RawMessage) ([]keyValue, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("want an object or an action")
	}
	var out []keyValue
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, keyValue{strings.TrimSpace(key), v})
	}
	return out, nil
}
