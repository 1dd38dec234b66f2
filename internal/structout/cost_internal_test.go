package structout

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The validator has no hook to count its evaluations, so they are
// counted in another implementation of the same drafts, which evaluates
// every applicator fully where google/jsonschema-go may stop at the first
// error: its count is at least the validator's.

// refuseAll is the other implementation's loader: nothing is read.
type refuseAll struct{}

func (refuseAll) Load(url string) (any, error) { return nil, fmt.Errorf("not loading %s", url) }

// counter counts the evaluations that reach a schema's extensions: a
// lower bound of the validator's work.
type counter struct{ n *int }

func (c counter) Validate(*jsonschema.ValidatorContext, any) { *c.n++ }

// evaluations validates inst against schema, counting evaluations.
func evaluations(t *testing.T, schema string, inst any) int {
	t.Helper()
	n := 0
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(schema)))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(refuseAll{})
	c.AssertVocabs()
	c.RegisterVocabulary(&jsonschema.Vocabulary{URL: "urn:agentd:count",
		Compile: func(*jsonschema.CompilerContext, map[string]any) (jsonschema.SchemaExt, error) {
			return counter{&n}, nil
		}})
	if err := c.AddResource(base, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(base)
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Validate(inst)
	return n
}

// TestEstimateIsAnUpperBound: for each applicator the estimate counts at
// least the evaluations the validator makes, valid answers and invalid.
func TestEstimateIsAnUpperBound(t *testing.T) {
	t.Parallel()
	const defs = `"$defs":{"s":{"anyOf":[{"$ref":"#/$defs/t"},{"$ref":"#/$defs/t"},{"type":"object"}]},"t":{"allOf":[{"$ref":"#/$defs/u"},{"$ref":"#/$defs/u"}]},"u":{"oneOf":[{"type":"integer"},{"not":{"type":"string"}},{"minimum":0}]}}`
	for _, tc := range []struct{ schema, answer string }{
		{`{"$ref":"#/$defs/s",` + defs + `}`, `5`},
		{`{"$ref":"#/$defs/s",` + defs + `}`, `"x"`},
		{`{"items":{"$ref":"#/$defs/s"},` + defs + `}`, `[1,"a",{},2,null,[3]]`},
		{`{"prefixItems":[{"$ref":"#/$defs/s"}],"items":{"$ref":"#/$defs/t"},"contains":{"$ref":"#/$defs/u"},"unevaluatedItems":{"$ref":"#/$defs/s"},` + defs + `}`, `[1,"a",{},2]`},
		{`{"properties":{"a":{"$ref":"#/$defs/s"}},"patternProperties":{"^b":{"$ref":"#/$defs/t"}},"additionalProperties":{"$ref":"#/$defs/u"},"propertyNames":{"$ref":"#/$defs/s"},"unevaluatedProperties":{"$ref":"#/$defs/s"},` + defs + `}`, `{"a":1,"b1":"x","c":{},"d":[1]}`},
		{`{"if":{"$ref":"#/$defs/s"},"then":{"$ref":"#/$defs/t"},"else":{"$ref":"#/$defs/u"},"dependentSchemas":{"a":{"$ref":"#/$defs/s"}},` + defs + `}`, `{"a":1}`},
		{`{"contains":{"$ref":"#/$defs/s"},` + defs + `}`, `[1,2,3,4]`},
		{`{"prefixItems":[{"$ref":"#/$defs/s"},{"$ref":"#/$defs/s"}],` + defs + `}`, `[1,2,3,4]`},
		{`{"unevaluatedItems":{"$ref":"#/$defs/s"},` + defs + `}`, `[1,2,3,4]`},
		{`{"propertyNames":{"$ref":"#/$defs/s"},` + defs + `}`, `{"a":1,"b":2}`},
		{`{"patternProperties":{".":{"$ref":"#/$defs/s"}},` + defs + `}`, `{"a":1,"b":2}`},
		{`{"additionalProperties":{"$ref":"#/$defs/s"},` + defs + `}`, `{"a":1,"b":2}`},
		{`{"unevaluatedProperties":{"$ref":"#/$defs/s"},` + defs + `}`, `{"a":1,"b":2}`},
		{`{"dependentSchemas":{"a":{"$ref":"#/$defs/s"},"b":{"$ref":"#/$defs/s"}},` + defs + `}`, `{"a":1,"b":2}`},
		{`{"if":{"$ref":"#/$defs/s"},"then":{"$ref":"#/$defs/s"},"else":{"$ref":"#/$defs/s"},` + defs + `}`, `4`},
		{`{"not":{"$ref":"#/$defs/s"},` + defs + `}`, `4`},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"s":{"anyOf":[{"$ref":"#/definitions/s2"},{"type":"string"}]},"s2":{"type":"array","items":[{"$ref":"#/definitions/s"}],"additionalItems":{"$ref":"#/definitions/s"}}},"dependencies":{"a":{"$ref":"#/definitions/s"}},"properties":{"a":{"$ref":"#/definitions/s"}}}`, `{"a":[["x",[1]],2,"y"]}`},
	} {
		s, err := Compile([]byte(tc.schema))
		if err != nil {
			t.Fatalf("%s: %v", tc.schema, err)
		}
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(tc.answer)))
		if err != nil {
			t.Fatal(err)
		}
		e := &estimate{c: s.cost, left: 1 << 40}
		if !e.eval(s.cost.root, inst, 0, false) {
			t.Fatal("the estimate ran out")
		}
		est, real := 1<<40-e.left, evaluations(t, tc.schema, inst)
		if est < real {
			t.Errorf("%s with %s: estimate %d < %d evaluations", tc.schema, tc.answer, est, real)
		}
	}
}

// TestErrorTextCharged: the validator builds an error string for every
// failing branch and copies it once per enclosing evaluation, so the
// worst answer the budget accepts (every branch of shared anyOfs
// failing) must be charged for that text: uncharged, it allocated 1.6 GB.
// Not parallel: it reads the process's allocation counter.
func TestErrorTextCharged(t *testing.T) {
	n := 1
	for {
		s, err := Compile([]byte(bombSchema(n + 1)))
		if err != nil {
			t.Fatal(err)
		}
		if !s.cost.within(5.0, MaxWork) {
			break
		}
		n++
	}
	s, err := Compile([]byte(bombSchema(n)))
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := s.Validate([]byte("5")); err == nil || err == ErrTooCostly {
		t.Fatalf("the worst accepted answer: %v", err)
	}
	runtime.ReadMemStats(&after)
	if mb := (after.TotalAlloc - before.TotalAlloc) >> 20; mb > 400 {
		t.Errorf("the worst accepted answer (%d levels) allocated %d MB", n, mb)
	}
}
