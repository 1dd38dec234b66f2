package structout

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// js is the library's schema: one node of the parsed document.
type js = jsonschema.Schema

// coster holds what the estimate knows of every schema in the document.
type coster struct {
	root   *js
	draft7 bool
	nodes  map[*js]*node
}

// unsupported are keywords of other drafts the validator would ignore
// silently: a schema using them means something the check would not do.
var unsupported = []string{"$recursiveRef", "$recursiveAnchor"}

// newCoster indexes the document under root: every schema by its JSON
// pointer and anchor, each $ref resolved among them. It refuses what the
// validator would read from outside, ignore, or recurse on forever.
func newCoster(root *js) (*coster, error) {
	c := &coster{root: root, nodes: map[*js]*node{},
		draft7: strings.Contains(root.Schema, "draft-07")}
	byPointer := map[string]*js{}
	anchors := map[string]*js{}
	var errs []error
	var walk func(s *js, ptr string)
	walk = func(s *js, ptr string) {
		if c.nodes[s] != nil {
			return
		}
		n, err := c.nodeOf(s, ptr == "")
		if err != nil {
			errs = append(errs, err)
		}
		c.nodes[s] = n
		byPointer[ptr] = s
		if a := anchorOf(s, c.draft7); a != "" {
			anchors[a] = s
		}
		subschemas(s, func(key string, sub *js) { walk(sub, ptr+key) })
	}
	walk(root, "")
	if len(errs) > 0 {
		return nil, errs[0]
	}
	for s, n := range c.nodes {
		if s.Ref == "" {
			continue
		}
		t, err := target(s.Ref, byPointer, anchors)
		if err != nil {
			return nil, err
		}
		n.ref = t
	}
	if err := c.acyclic(); err != nil {
		return nil, err
	}
	return c, nil
}

// nodeOf checks one schema and computes its fixed costs.
func (c *coster) nodeOf(s *js, isRoot bool) (*node, error) {
	if s.DynamicRef != "" {
		return nil, errors.New("$dynamicRef is not supported in a structured-output schema")
	}
	for _, k := range unsupported {
		if _, ok := s.Extra[k]; ok {
			return nil, fmt.Errorf("%s is not supported in a structured-output schema", k)
		}
	}
	if s.ID != "" && !isRoot && !(c.draft7 && strings.HasPrefix(s.ID, "#")) {
		return nil, errors.New("$id is allowed only at the schema's root")
	}
	n := &node{weight: 1 + len(s.Required), format: s.Format != "", pattern: len(s.Pattern)}
	types := s.Types
	if s.Type != "" {
		types = append(types, s.Type)
	}
	for _, t := range types {
		n.types |= typeBit(t)
	}
	for _, v := range s.Enum {
		n.weight += size(v)
	}
	if s.Const != nil {
		n.weight += size(*s.Const)
	}
	for _, names := range s.DependentRequired {
		n.weight += len(names)
	}
	for _, names := range s.DependencyStrings {
		n.weight += len(names)
	}
	if len(s.PatternProperties) > 0 {
		n.patterns = map[*regexp.Regexp]*js{}
		for src, p := range s.PatternProperties {
			re, err := regexp.Compile(src)
			if err != nil {
				return nil, fmt.Errorf("patternProperties %q: %v", short(src), err)
			}
			n.patterns[re] = p
		}
	}
	return n, nil
}

// anchorOf is the plain-name fragment that names s: $anchor, or in
// draft-07 an $id of the form "#name".
func anchorOf(s *js, draft7 bool) string {
	if draft7 {
		return strings.TrimPrefix(s.ID, "#")
	}
	return s.Anchor
}

// target resolves a $ref. Only fragments are references inside the
// schema: a JSON pointer from the root ("#/$defs/a") or an anchor.
func target(ref string, byPointer, anchors map[string]*js) (*js, error) {
	u, err := url.Parse(ref)
	if err != nil || !strings.HasPrefix(ref, "#") {
		return nil, fmt.Errorf("only references inside the schema are allowed, not %s", short(ref))
	}
	frag := u.Fragment
	t := byPointer[frag]
	if frag != "" && !strings.HasPrefix(frag, "/") {
		t = anchors[frag]
	}
	if t == nil {
		return nil, fmt.Errorf("$ref %s: no schema there", short(ref))
	}
	return t, nil
}

// acyclic refuses a cycle of schemas applied at one place in the answer
// (a $ref to an enclosing schema, through allOf, anyOf, …): the
// validator would recurse on it until the stack overflowed.
func (c *coster) acyclic() error {
	const (
		open = 1
		done = 2
	)
	state := map[*js]int{}
	var visit func(s *js) error
	visit = func(s *js) error {
		switch state[s] {
		case open:
			return errors.New("the schema applies itself at the same place in the answer without end (a $ref cycle)")
		case done:
			return nil
		}
		state[s] = open
		for _, t := range inPlace(s, c.nodes[s]) {
			if err := visit(t); err != nil {
				return err
			}
		}
		state[s] = done
		return nil
	}
	for s := range c.nodes {
		if err := visit(s); err != nil {
			return err
		}
	}
	return nil
}

// inPlace lists the schemas applied at the same location as s.
func inPlace(s *js, n *node) []*js {
	var out []*js
	for _, t := range []*js{n.ref, s.Not, s.If, s.Then, s.Else} {
		if t != nil {
			out = append(out, t)
		}
	}
	out = append(append(append(out, s.AllOf...), s.AnyOf...), s.OneOf...)
	for _, m := range []map[string]*js{s.DependentSchemas, s.DependencySchemas} {
		for _, t := range m {
			out = append(out, t)
		}
	}
	return out
}

// subschemas calls f with each schema directly inside s and the JSON
// pointer segments that lead to it from s.
func subschemas(s *js, f func(key string, sub *js)) {
	one := map[string]*js{"items": s.Items, "additionalItems": s.AdditionalItems, "contains": s.Contains,
		"unevaluatedItems": s.UnevaluatedItems, "additionalProperties": s.AdditionalProperties,
		"propertyNames": s.PropertyNames, "unevaluatedProperties": s.UnevaluatedProperties, "not": s.Not,
		"if": s.If, "then": s.Then, "else": s.Else, "contentSchema": s.ContentSchema}
	for k, sub := range one {
		if sub != nil {
			f("/"+k, sub)
		}
	}
	lists := map[string][]*js{"prefixItems": s.PrefixItems, "items": s.ItemsArray, "allOf": s.AllOf,
		"anyOf": s.AnyOf, "oneOf": s.OneOf}
	for k, l := range lists {
		for i, sub := range l {
			f(fmt.Sprintf("/%s/%d", k, i), sub)
		}
	}
	maps := map[string]map[string]*js{"$defs": s.Defs, "definitions": s.Definitions, "properties": s.Properties,
		"patternProperties": s.PatternProperties, "dependentSchemas": s.DependentSchemas,
		"dependencies": s.DependencySchemas}
	for k, m := range maps {
		for name, sub := range m {
			f("/"+k+"/"+escape(name), sub)
		}
	}
}

// escape writes a name as a JSON pointer segment.
func escape(name string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(name)
}
