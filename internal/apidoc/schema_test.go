package apidoc

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type inner struct {
	N int `json:"n"`
}

type Tree struct {
	Name     string          `json:"name"`
	Note     string          `json:"note,omitempty"`
	Children []Tree          `json:"children"`
	Raw      json.RawMessage `json:"raw,omitempty"`
	Skipped  string          `json:"-"`
	Ptr      *inner          `json:"ptr"`
	embedded
	hidden int
}

var _ = Tree{hidden: 1} // an unexported field, which the schema leaves out

type embedded struct {
	Flat bool `json:"flat"`
}

type shape struct {
	Kind string `json:"kind"`
	A    int    `json:"a"`
}

type Sum struct{}

func (Sum) JSONVariants() (string, map[string]any) {
	return "kind", map[string]any{"one": shape{}}
}

type Custom struct{}

func (Custom) JSONSchema() Schema { return Schema{"type": "string", "pattern": "^x"} }

type request struct {
	Must  string `json:"must" doc:"required"`
	Maybe string `json:"maybe"`
}

func TestSchemas(t *testing.T) {
	s := NewSet()
	if d := cmp.Diff(Schema{"$ref": "#/components/schemas/Tree"}, s.Of(Tree{})); d != "" {
		t.Error(d)
	}
	s.Of(Sum{})
	s.Of(Custom{})
	want := map[string]Schema{
		"Tree": {"type": "object", "required": []string{"name", "children", "ptr", "flat"}, "properties": Schema{
			"name":     Schema{"type": "string"},
			"note":     Schema{"type": "string"},
			"children": Schema{"anyOf": []any{Schema{"type": "array", "items": Schema{"$ref": "#/components/schemas/Tree"}}, Schema{"type": "null"}}},
			"raw":      Schema{},
			"ptr":      Schema{"anyOf": []any{Schema{"$ref": "#/components/schemas/Inner"}, Schema{"type": "null"}}},
			"flat":     Schema{"type": "boolean"},
		}},
		"Inner": {"type": "object", "required": []string{"n"}, "properties": Schema{"n": Schema{"type": "integer"}}},
		"Sum": {"oneOf": []any{Schema{"type": "object", "required": []string{"kind", "a"},
			"properties": Schema{"kind": Schema{"const": "one"}, "a": Schema{"type": "integer"}}}}},
		"Custom": {"type": "string", "pattern": "^x"},
	}
	if d := cmp.Diff(want, s.Components()); d != "" {
		t.Errorf("components (-want +got):\n%s", d)
	}
	got := s.OfRequest(request{})
	if d := cmp.Diff(Schema{"type": "object", "required": []string{"must"},
		"properties": Schema{"must": Schema{"type": "string"}, "maybe": Schema{"type": "string"}}}, got); d != "" {
		t.Errorf("request (-want +got):\n%s", d)
	}
}

type boxOf[T any] struct {
	Data T `json:"data"`
}

// TestGenericComponentNames: an instance of a generic type is a component
// named by the type and its arguments, a name a JSON pointer can hold (Go
// names the instance with its argument's package path).
func TestGenericComponentNames(t *testing.T) {
	s := NewSet()
	for _, tc := range []struct {
		v    any
		want string
	}{
		{boxOf[[]inner]{}, "BoxOfInnerList"},
		{boxOf[map[string]Tree]{}, "BoxOfTreeMap"},
		{boxOf[inner]{}, "BoxOfInner"},
		{boxOf[[]struct{}]{}, "BoxOfStructList"},
	} {
		if got := s.Of(tc.v)["$ref"]; got != "#/components/schemas/"+tc.want {
			t.Errorf("%T: $ref %v, want %s", tc.v, got, tc.want)
		}
	}
}
