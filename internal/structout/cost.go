package structout

import "regexp"

// The estimate of a validation's work. The validator evaluates a schema
// at an instance location, then the schemas it applies there (references,
// allOf, anyOf, oneOf, not, if/then/else, dependent schemas) and at its
// children (properties, items, …), each again. The work is the number of
// those evaluations, with multiplicity: a $def reached through two
// branches is evaluated twice, and that is how a small schema takes
// exponential time. The estimate follows the same walk over the actual
// answer, taking every branch the validator might take (both then and
// else, every anyOf and oneOf branch), so it is never below the real
// count; each evaluation costs one unit plus what its own keywords cost on
// the value (enum and const comparisons, patterns and formats over the
// string, required names, hashing for uniqueItems).
//
// The validator builds an error string for every evaluation that fails,
// wrapped once per enclosing evaluation ("validating /$defs/a: …"), and
// anyOf, oneOf, not and if discard their branches' errors and go on: under
// them a failing evaluation at depth d costs about d copies of a text d
// prefixes long. Evaluations under such a branch are charged for that
// (textCost); elsewhere the first error ends the validation.
//
// The estimate stops as soon as the budget is spent, so its own work is
// bounded by the budget too.

// node is what the estimate needs of one schema.
type node struct {
	types  uint8 // typeBits; 0: any type
	weight int   // fixed cost of evaluating it: enum, const, required
	// pattern is the length of the pattern's source (0: none).
	pattern int
	format  bool
	// ref is the schema $ref names (resolved by index.go), patterns the
	// compiled patternProperties.
	ref      *js
	patterns map[*regexp.Regexp]*js
}

// Instance type bits.
const (
	tNull uint8 = 1 << iota
	tBool
	tNumber
	tString
	tArray
	tObject
)

func typeBit(t string) uint8 {
	switch t {
	case "null":
		return tNull
	case "boolean":
		return tBool
	case "number", "integer":
		return tNumber
	case "string":
		return tString
	case "array":
		return tArray
	case "object":
		return tObject
	}
	return 0
}

// size is the number of JSON values in v, a bound on comparing it.
func size(v any) int {
	switch v := v.(type) {
	case map[string]any:
		n := 1
		for k, e := range v {
			n += 1 + len(k)/64 + size(e)
		}
		return n
	case []any:
		n := 1
		for _, e := range v {
			n += size(e)
		}
		return n
	case string:
		return 1 + len(v)/64
	}
	return 1
}

func typeOf(v any) uint8 {
	switch v.(type) {
	case nil:
		return tNull
	case bool:
		return tBool
	case string:
		return tString
	case []any:
		return tArray
	case map[string]any:
		return tObject
	}
	return tNumber
}

// estimate is one walk, with what is left of its budget.
type estimate struct {
	c    *coster
	left int
}

// within reports whether validating inst takes at most budget units.
func (c *coster) within(inst any, budget int) bool {
	e := &estimate{c: c, left: budget}
	return e.eval(c.root, inst, 0, false)
}

// charge spends n units; false once the budget is gone.
func (e *estimate) charge(n int) bool {
	e.left -= n
	return e.left >= 0
}

// textCost is what the error text of a discarded evaluation at the given
// depth costs, in units (see the comment at the top).
func textCost(depth int) int {
	return depth * depth / 64
}

// eval charges evaluating s at v and everything it applies; false once
// the budget is spent. depth is the validator's recursion depth, and
// discarded says an enclosing anyOf, oneOf, not or if discards errors.
func (e *estimate) eval(s *js, v any, depth int, discarded bool) bool {
	if s == nil {
		return true
	}
	n := e.c.nodes[s]
	c := n.weight
	if discarded {
		c += textCost(depth)
	}
	if !e.charge(c) {
		return false
	}
	depth++
	// The validator follows $ref before it checks the type.
	if n.ref != nil && !e.eval(n.ref, v, depth, discarded) {
		return false
	}
	if n.ref != nil && e.c.draft7 {
		return true // draft-07 ignores $ref's siblings
	}
	if n.types != 0 && n.types&typeOf(v) == 0 {
		return true
	}
	if !e.charge(valueCost(s, n, v)) {
		return false
	}
	return e.applied(s, v, depth, discarded) && e.descend(s, v, depth, discarded)
}

// applied evaluates the schemas s applies at the same location.
func (e *estimate) applied(s *js, v any, depth int, discarded bool) bool {
	for _, t := range s.AllOf {
		if !e.eval(t, v, depth, discarded) {
			return false
		}
	}
	branches := []*js{s.Not, s.If, s.Then, s.Else}
	branches = append(append(branches, s.AnyOf...), s.OneOf...)
	for _, t := range branches {
		if !e.eval(t, v, depth, true) {
			return false
		}
	}
	if obj, ok := v.(map[string]any); ok {
		for _, m := range []map[string]*js{s.DependentSchemas, s.DependencySchemas} {
			for k, d := range m {
				if _, ok := obj[k]; ok && !e.eval(d, v, depth, discarded) {
					return false
				}
			}
		}
	}
	return true
}

// descend evaluates the schemas s applies to v's members.
func (e *estimate) descend(s *js, v any, depth int, discarded bool) bool {
	switch v := v.(type) {
	case map[string]any:
		for k, m := range v {
			if !e.member(s, k, m, depth, discarded) {
				return false
			}
		}
	case []any:
		for i, m := range v {
			if !e.item(s, i, m, depth, discarded) {
				return false
			}
		}
	}
	return true
}

// member evaluates what s applies to the property k of an object.
func (e *estimate) member(s *js, k string, m any, depth int, discarded bool) bool {
	if !e.charge(1) || !e.eval(s.PropertyNames, k, depth, discarded) || !e.eval(s.UnevaluatedProperties, m, depth, discarded) {
		return false
	}
	p, named := s.Properties[k]
	if named && !e.eval(p, m, depth, discarded) {
		return false
	}
	for re, p := range e.c.nodes[s].patterns {
		if !e.charge(regexCost(len(k), len(re.String()))) {
			return false
		}
		if re.MatchString(k) {
			named = true
			if !e.eval(p, m, depth, discarded) {
				return false
			}
		}
	}
	if s.AdditionalProperties != nil && !named {
		return e.eval(s.AdditionalProperties, m, depth, discarded)
	}
	return true
}

// item evaluates what s applies to the i-th item of an array.
func (e *estimate) item(s *js, i int, m any, depth int, discarded bool) bool {
	// contains is satisfied by some items and fails on others: its
	// errors are discarded.
	if !e.charge(1) || !e.eval(s.Contains, m, depth, true) || !e.eval(s.UnevaluatedItems, m, depth, discarded) {
		return false
	}
	if i < len(s.PrefixItems) {
		return e.eval(s.PrefixItems[i], m, depth, discarded)
	}
	if e.c.draft7 && s.ItemsArray != nil {
		if i < len(s.ItemsArray) {
			return e.eval(s.ItemsArray[i], m, depth, discarded)
		}
		return e.eval(s.AdditionalItems, m, depth, discarded)
	}
	return e.eval(s.Items, m, depth, discarded)
}

// valueCost is what s's own keywords cost on v beyond its fixed weight:
// length checks, its pattern and format over a string, uniqueItems'
// hashing of an array, the walk over the schema's properties.
func valueCost(s *js, n *node, v any) int {
	switch v := v.(type) {
	case string:
		c := len(v) / 64
		if n.pattern > 0 {
			c += regexCost(len(v), n.pattern)
		}
		if n.format {
			c += len(v) / 16
		}
		return c
	case []any:
		if s.UniqueItems {
			return size(v)
		}
	case map[string]any:
		return len(v)/8 + len(s.Properties)/8
	}
	return 0
}

// regexCost bounds matching a pattern of the given source length against
// a string: Go's matcher runs in time linear in both.
func regexCost(text, pattern int) int {
	return 1 + text*(1+pattern/16)/64
}
