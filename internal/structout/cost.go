package structout

import (
	"encoding/json"
	"slices"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The estimate of a validation's work. The validator evaluates a schema
// at an instance location, then the schemas it applies there (references,
// allOf, anyOf, oneOf, not, if/then/else, dependent schemas) and at its
// children (properties, items, …), each again. The work is the number of
// those evaluations, with multiplicity: a $def reached through two
// branches is evaluated twice, and that is how a small schema takes
// exponential time. The estimate follows the same walk over the actual
// answer, taking every branch the validator might take (both then and
// else, every anyOf and oneOf branch), so it is never below the real count; each evaluation costs
// one unit plus what its own keywords cost on the value (enum and const
// comparisons, patterns and formats over the string, required names,
// hashing for uniqueItems). It stops as soon as the budget is spent, so
// its own work is bounded by the budget too.

// node is what the estimate needs of one compiled schema.
type node struct {
	types  uint8 // typeBits; 0: any type
	weight int   // fixed cost of evaluating it: enum, const, required
	// pattern is the length of the pattern's source (0: none).
	pattern int
	format  bool
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

// coster holds the nodes of a compiled schema.
type coster struct {
	root  *jsonschema.Schema
	nodes map[*jsonschema.Schema]*node
	// dynamic is set when a schema uses $dynamicRef or $recursiveRef,
	// whose targets depend on the path taken: Compile refuses those.
	dynamic bool
}

// newCoster walks every schema reachable from root once.
func newCoster(root *jsonschema.Schema) *coster {
	c := &coster{root: root, nodes: map[*jsonschema.Schema]*node{}}
	stack := []*jsonschema.Schema{root}
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if s == nil || c.nodes[s] != nil {
			continue
		}
		c.nodes[s] = nodeOf(s)
		if s.DynamicRef != nil || s.RecursiveRef != nil {
			c.dynamic = true
		}
		stack = append(stack, inPlace(s)...)
		stack = append(stack, children(s)...)
	}
	return c
}

// nodeOf computes a schema's fixed costs.
func nodeOf(s *jsonschema.Schema) *node {
	n := &node{weight: 1 + len(s.Required), format: s.Format != nil}
	if s.Types != nil {
		for _, t := range s.Types.ToStrings() {
			n.types |= typeBit(t)
		}
	}
	if s.Enum != nil {
		for _, v := range s.Enum.Values {
			n.weight += size(v)
		}
	}
	if s.Const != nil {
		n.weight += size(*s.Const)
	}
	for _, names := range s.DependentRequired {
		n.weight += len(names)
	}
	for _, d := range s.Dependencies {
		if names, ok := d.([]string); ok {
			n.weight += len(names)
		}
	}
	if s.Pattern != nil {
		n.pattern = len(s.Pattern.String())
	}
	return n
}

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

// inPlace lists the schemas evaluated at the same location, statically.
func inPlace(s *jsonschema.Schema) []*jsonschema.Schema {
	out := []*jsonschema.Schema{s.Ref, s.Not, s.If, s.Then, s.Else}
	out = append(out, s.AllOf...)
	out = append(out, s.AnyOf...)
	out = append(out, s.OneOf...)
	for _, d := range s.DependentSchemas {
		out = append(out, d)
	}
	for _, d := range s.Dependencies {
		if d, ok := d.(*jsonschema.Schema); ok {
			out = append(out, d)
		}
	}
	return out
}

// children lists the schemas evaluated at a child location, statically.
func children(s *jsonschema.Schema) []*jsonschema.Schema {
	out := []*jsonschema.Schema{s.PropertyNames, s.UnevaluatedProperties, s.Contains, s.Items2020,
		s.UnevaluatedItems, s.ContentSchema}
	for _, p := range s.Properties {
		out = append(out, p)
	}
	for _, p := range s.PatternProperties {
		out = append(out, p)
	}
	out = append(out, s.PrefixItems...)
	for _, v := range []any{s.AdditionalProperties, s.Items, s.AdditionalItems} {
		switch v := v.(type) {
		case *jsonschema.Schema:
			out = append(out, v)
		case []*jsonschema.Schema:
			out = append(out, v...)
		}
	}
	return out
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
	case json.Number:
		return 1 + len(v)/16
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
	return e.eval(c.root, inst, nil)
}

// charge spends n units; false once the budget is gone.
func (e *estimate) charge(n int) bool {
	e.left -= n
	return e.left >= 0
}

// eval charges evaluating s at v and everything it applies; false once
// the budget is spent. stack holds the schemas being evaluated at this
// location: one met again is a cycle, which the validator reports
// instead of following.
func (e *estimate) eval(s *jsonschema.Schema, v any, stack []*jsonschema.Schema) bool {
	if s == nil {
		return true
	}
	n := e.c.nodes[s]
	if !e.charge(n.weight + len(stack)/32) {
		return false
	}
	if s.Bool != nil || slices.Contains(stack, s) || n.types != 0 && n.types&typeOf(v) == 0 {
		return true
	}
	if !e.charge(valueCost(s, n, v)) {
		return false
	}
	stack = append(stack, s)
	if s.Ref != nil && s.DraftVersion < 2019 {
		return e.eval(s.Ref, v, stack) // older drafts ignore $ref's siblings
	}
	return e.applied(s, v, stack) && e.descend(s, v)
}

// applied evaluates the schemas s applies at the same location.
func (e *estimate) applied(s *jsonschema.Schema, v any, stack []*jsonschema.Schema) bool {
	all := []*jsonschema.Schema{s.Ref, s.Not, s.If, s.Then, s.Else}
	all = append(append(append(all, s.AllOf...), s.AnyOf...), s.OneOf...)
	if obj, ok := v.(map[string]any); ok {
		for k, d := range s.DependentSchemas {
			if _, ok := obj[k]; ok {
				all = append(all, d)
			}
		}
		for k, d := range s.Dependencies {
			if d, ok := d.(*jsonschema.Schema); ok && obj[k] != nil {
				all = append(all, d)
			}
		}
	}
	for _, t := range all {
		if !e.eval(t, v, stack) {
			return false
		}
	}
	return true
}

// descend evaluates the schemas s applies to v's members.
func (e *estimate) descend(s *jsonschema.Schema, v any) bool {
	switch v := v.(type) {
	case map[string]any:
		for k, m := range v {
			if !e.member(s, k, m) {
				return false
			}
		}
	case []any:
		for i, m := range v {
			if !e.item(s, i, m) {
				return false
			}
		}
	}
	return true
}

// member evaluates what s applies to the property k of an object.
func (e *estimate) member(s *jsonschema.Schema, k string, m any) bool {
	if !e.charge(1) || !e.eval(s.PropertyNames, k, nil) || !e.eval(s.UnevaluatedProperties, m, nil) {
		return false
	}
	p, named := s.Properties[k]
	if named && !e.eval(p, m, nil) {
		return false
	}
	for re, p := range s.PatternProperties {
		if !e.charge(regexCost(len(k), len(re.String()))) {
			return false
		}
		if re.MatchString(k) {
			named = true
			if !e.eval(p, m, nil) {
				return false
			}
		}
	}
	if add, ok := s.AdditionalProperties.(*jsonschema.Schema); ok && !named {
		return e.eval(add, m, nil)
	}
	return true
}

// item evaluates what s applies to the i-th item of an array.
func (e *estimate) item(s *jsonschema.Schema, i int, m any) bool {
	if !e.charge(1) || !e.eval(s.Contains, m, nil) || !e.eval(s.UnevaluatedItems, m, nil) {
		return false
	}
	if i < len(s.PrefixItems) {
		return e.eval(s.PrefixItems[i], m, nil)
	}
	if s.Items2020 != nil {
		return e.eval(s.Items2020, m, nil)
	}
	switch items := s.Items.(type) {
	case *jsonschema.Schema:
		return e.eval(items, m, nil)
	case []*jsonschema.Schema:
		if i < len(items) {
			return e.eval(items[i], m, nil)
		}
		if add, ok := s.AdditionalItems.(*jsonschema.Schema); ok {
			return e.eval(add, m, nil)
		}
	}
	return true
}

// valueCost is what s's own keywords cost on v beyond its fixed weight:
// length checks, its pattern and format over a string, uniqueItems'
// hashing of an array.
func valueCost(s *jsonschema.Schema, n *node, v any) int {
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
		return len(v) / 8
	}
	return 0
}

// regexCost bounds matching a pattern of the given source length against
// a string: Go's matcher runs in time linear in both.
func regexCost(text, pattern int) int {
	return 1 + text*(1+pattern/16)/64
}
