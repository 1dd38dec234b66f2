package structout_test

import (
	"testing"

	"github.com/agentd/agentd/internal/structout"
)

// FuzzCompileValidate: no schema a client sends and no answer a model
// gives makes Compile or Validate panic or recurse without end (the
// validator library panics on shapes it assumes resolved, and overflows
// the stack on reference cycles; either would end the whole server).
func FuzzCompileValidate(f *testing.F) {
	for _, s := range []string{realistic, bomb(3), `{"$ref":"#"}`, `{"$ref":"#/$defs/a","$defs":{"a":{"items":{"$ref":"#"}}}}`,
		`{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"a":{"$id":"#x","items":[{"$ref":"#x"}]}},"$ref":"#/definitions/a"}`,
		`{"if":{"type":"string"},"then":{"minLength":2},"else":{"not":{}},"dependentSchemas":{"a":{"required":["b"]}}}`,
		`{"properties":{"a~b/c":{"type":"integer"}},"$ref":"#/properties/a~0b~1c"}`, `true`, `false`} {
		f.Add(s, `{"summary":"x","items":[{"name":"n","price":1,"kind":"book","tags":[],"meta":null}]}`)
		f.Add(s, `[[["a"],1],{"a":"b"}]`)
	}
	f.Fuzz(func(t *testing.T, schema, answer string) {
		s, err := structout.Compile([]byte(schema))
		if err != nil {
			return
		}
		_ = s.Validate([]byte(answer))
	})
}
