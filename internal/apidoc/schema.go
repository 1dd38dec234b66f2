// Package apidoc turns Go types into the JSON Schemas of an OpenAPI 3.1
// document, so that the document describes exactly what the handlers
// decode and encode: the schema of a body is computed from the type the
// handler uses, never written beside it.
//
// Struct fields follow encoding/json: the json tag names a property,
// omitempty makes it optional, embedded structs are flattened, "-" is
// left out. Exported named structs become components ($ref); others are
// inlined. A type that marshals itself says its own shape: JSONSchema
// for a schema written by hand, JSONVariants for a union told apart by one
// field.
package apidoc

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"time"
)

// Schema is one JSON Schema object.
type Schema = map[string]any

// Describer is implemented by types whose JSON is not their fields' (a
// custom MarshalJSON) and that are not a union: JSONSchema returns the
// schema of what they marshal to.
type Describer interface {
	JSONSchema() Schema
}

// Union is implemented by types that marshal as one of several shapes
// told apart by the value of one field: JSONVariants returns that field's
// name and, per value, a value of the Go type marshalled for it.
type Union interface {
	JSONVariants() (field string, shapes map[string]any)
}

// Set collects the component schemas that the schemas it returns refer
// to.
type Set struct {
	defs  map[string]Schema
	names map[reflect.Type]string
}

// NewSet returns an empty set.
func NewSet() *Set {
	return &Set{defs: map[string]Schema{}, names: map[reflect.Type]string{}}
}

// Components returns the named schemas, for components.schemas.
func (s *Set) Components() map[string]Schema { return s.defs }

// Add registers a schema written by hand under a name, for $ref.
func (s *Set) Add(name string, sc Schema) { s.defs[name] = sc }

// Of returns the schema of v's type (a $ref for a named struct).
func (s *Set) Of(v any) Schema { return s.schema(reflect.TypeOf(v), false) }

// OfRequest is Of for a request body: fields are optional unless tagged
// `doc:"required"`, since an absent field decodes as its zero value.
func (s *Set) OfRequest(v any) Schema { return s.schema(reflect.TypeOf(v), true) }

var (
	rawType  = reflect.TypeFor[json.RawMessage]()
	timeType = reflect.TypeFor[time.Time]()
	descType = reflect.TypeFor[Describer]()
	unioType = reflect.TypeFor[Union]()
)

func (s *Set) schema(t reflect.Type, request bool) Schema {
	if t == nil {
		return Schema{}
	}
	switch t {
	case rawType:
		return Schema{}
	case timeType:
		return Schema{"type": "string", "format": "date-time"}
	}
	if t.Implements(descType) || t.Implements(unioType) {
		return s.named(t, request)
	}
	switch t.Kind() {
	case reflect.Pointer:
		return s.schema(t.Elem(), request)
	case reflect.Bool:
		return Schema{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return Schema{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return Schema{"type": "number"}
	case reflect.String:
		return Schema{"type": "string"}
	case reflect.Interface:
		return Schema{}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return Schema{"type": "string", "contentEncoding": "base64"}
		}
		return Schema{"type": "array", "items": s.schema(t.Elem(), request)}
	case reflect.Map:
		return Schema{"type": "object", "additionalProperties": s.schema(t.Elem(), request)}
	case reflect.Struct:
		if t.Name() != "" {
			return s.named(t, request)
		}
		return s.object(t, request)
	}
	return Schema{}
}

// named returns a $ref to t's component, building it on first use.
func (s *Set) named(t reflect.Type, request bool) Schema {
	if request {
		// Request shapes are not shared with responses: their required
		// fields differ.
		return s.build(t, request)
	}
	name, ok := s.names[t]
	if !ok {
		name = componentName(t.Name())
		if _, taken := s.defs[name]; taken {
			name = pkgName(t) + name
		}
		s.names[t] = name
		s.defs[name] = Schema{} // placeholder: recursive types refer to it
		s.defs[name] = s.build(t, request)
	}
	return Schema{"$ref": "#/components/schemas/" + name}
}

func (s *Set) build(t reflect.Type, request bool) Schema {
	zero := reflect.New(t).Elem().Interface()
	if u, ok := zero.(Union); ok {
		field, shapes := u.JSONVariants()
		keys := make([]string, 0, len(shapes))
		for k := range shapes {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var one []any
		for _, k := range keys {
			sc := s.object(reflect.TypeOf(shapes[k]), request)
			props := sc["properties"].(Schema)
			props[field] = Schema{"const": k}
			sc["required"] = addRequired(sc["required"], field)
			one = append(one, sc)
		}
		return Schema{"oneOf": one}
	}
	if d, ok := zero.(Describer); ok {
		return d.JSONSchema()
	}
	return s.object(t, request)
}

func addRequired(list any, name string) []string {
	req, _ := list.([]string)
	for _, r := range req {
		if r == name {
			return req
		}
	}
	return append(req, name)
}

// object is the schema of a struct's fields, as encoding/json writes them.
func (s *Set) object(t reflect.Type, request bool) Schema {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	props := Schema{}
	var required []string
	s.fields(t, request, props, &required)
	sc := Schema{"type": "object", "properties": props}
	if len(required) > 0 {
		sc["required"] = required
	}
	return sc
}

func (s *Set) fields(t reflect.Type, request bool, props Schema, required *[]string) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				s.fields(ft, request, props, required)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		sc := s.schema(f.Type, request)
		omit := strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero")
		if !request && !omit && nullable(f.Type) {
			// A nil pointer, slice or map without omitempty is null.
			sc = Schema{"anyOf": []any{sc, Schema{"type": "null"}}}
		}
		props[name] = sc
		if request && f.Tag.Get("doc") == "required" || !request && !omit {
			*required = append(*required, name)
		}
	}
}

// nullable reports whether a zero value of t marshals as null.
func nullable(t reflect.Type) bool {
	if t == rawType {
		return false // marshalled as null, but described as any JSON
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map:
		return true
	}
	return false
}

// componentName names a type's component: its Go name, capitalized,
// without a "JSON" suffix (the wire shape of an unexported type).
func componentName(name string) string {
	if i := strings.IndexByte(name, '['); i > 0 && strings.HasSuffix(name, "]") {
		// A generic type's instance: its name, then its arguments'.
		var sb strings.Builder
		sb.WriteString(componentName(name[:i]))
		for _, arg := range strings.Split(name[i+1:len(name)-1], ",") {
			sb.WriteString(typeArgName(arg))
		}
		return sb.String()
	}
	if n := strings.TrimSuffix(name, "JSON"); n != "" {
		name = n
	}
	return strings.ToUpper(name[:1]) + name[1:]
}

// typeArgName names a generic type's argument in its instance's
// component name: the type's own name (its package path dropped), with
// List for a slice and Map for a map, and nothing a JSON pointer could
// not hold.
func typeArgName(arg string) string {
	suffix := ""
	for {
		switch {
		case strings.HasPrefix(arg, "[]"):
			arg, suffix = arg[2:], "List"+suffix
			continue
		case strings.HasPrefix(arg, "map["):
			if j := strings.IndexByte(arg, ']'); j > 0 {
				arg, suffix = arg[j+1:], "Map"+suffix
				continue
			}
		}
		break
	}
	if i := strings.LastIndexAny(arg, "./"); i >= 0 {
		arg = arg[i+1:]
	}
	arg = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, arg)
	if arg == "" {
		return suffix
	}
	return componentName(arg) + suffix
}

func pkgName(t reflect.Type) string {
	p := t.PkgPath()
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		p = p[i+1:]
	}
	if p == "" {
		return ""
	}
	return strings.ToUpper(p[:1]) + p[1:]
}
