package structout_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/structout"
)

// bomb is a small schema whose validation is exponential: each level is
// an anyOf of two references to the next, so an answer that matches no
// branch makes the validator try 2^n paths (n=30 would run for hours).
func bomb(n int) string {
	var b strings.Builder
	b.WriteString(`{"$ref":"#/$defs/d0","$defs":{`)
	for i := range n {
		fmt.Fprintf(&b, `"d%d":{"anyOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]},`, i, i+1, i+1)
	}
	fmt.Fprintf(&b, `"d%d":{"type":"string"}}}`, n)
	return b.String()
}

// realistic is a structured-output schema as clients write them.
const realistic = `{"type":"object","properties":{"summary":{"type":"string"},"items":{"type":"array","items":{"type":"object",
"properties":{"name":{"type":"string","minLength":1},"price":{"type":"number","minimum":0},"kind":{"enum":["book","film","game","music"]},
"tags":{"type":"array","items":{"type":"string"},"uniqueItems":true},
"meta":{"anyOf":[{"type":"null"},{"$ref":"#/$defs/meta"}]}},
"required":["name","price","kind","tags","meta"],"additionalProperties":false}}},"required":["summary","items"],"additionalProperties":false,
"$defs":{"meta":{"type":"object","properties":{"id":{"type":"string","pattern":"^[a-z0-9-]+$"},"rank":{"type":"integer"}},"required":["id"],"additionalProperties":false}}}`

// bigAnswer is a valid answer to realistic of about n bytes.
func bigAnswer(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"summary":"a list","items":[`)
	for i := 0; b.Len() < n-200; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"name":"item number %d","price":%d.5,"kind":"book","tags":["a","b","c%d"],"meta":{"id":"id-%d","rank":%d}}`, i, i, i, i, i)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// TestSchemaLimits: a schema over the size or depth limit, or with a
// number the validator would spend long parsing, is refused before it is
// compiled, with the limit named.
func TestSchemaLimits(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ schema, want string }{
		"size":     {`{"enum":["` + strings.Repeat("x", structout.MaxSchemaBytes) + `"]}`, "over the limit of 65536 bytes"},
		"depth":    {strings.Repeat(`{"items":`, 65) + `{}` + strings.Repeat(`}`, 65), "nested more than 64 levels deep"},
		"exponent": {`{"maximum":1e999999}`, "exponent"},
		"digits":   {`{"maximum":` + strings.Repeat("9", 500) + `}`, "over the limit of 400"},
		"dynamic":  {`{"$dynamicAnchor":"n","properties":{"a":{"$dynamicRef":"#n"}}}`, "$dynamicRef"},
		// The validator would recurse on these until the stack overflows.
		"cycle":      {`{"$ref":"#"}`, "cycle"},
		"long cycle": {`{"$ref":"#/$defs/a","$defs":{"a":{"anyOf":[{"$ref":"#/$defs/b"}]},"b":{"allOf":[{"type":"string"},{"$ref":"#a"}]},"c":{"$anchor":"a","not":{"$ref":"#/$defs/a"}}}}`, "cycle"},
		// What the validator does not know is refused, not ignored.
		"draft-04":  {`{"$schema":"http://json-schema.org/draft-04/schema#","type":"string"}`, "only draft-07 and draft 2020-12"},
		"recursive": {`{"$recursiveAnchor":true,"items":{"$recursiveRef":"#"}}`, "$recursive"},
		"inner id":  {`{"properties":{"a":{"$id":"http://127.0.0.1:1/a.json"}}}`, "$id is allowed only at the schema's root"},
		"dangling":  {`{"$ref":"#/$defs/none"}`, "no schema there"},
	} {
		_, err := structout.Compile([]byte(tc.schema))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, tc.want)
		}
	}
	deep := strings.Repeat(`{"items":`, 63) + `{}` + strings.Repeat(`}`, 63)
	if _, err := structout.Compile([]byte(deep)); err != nil {
		t.Errorf("a schema at the depth limit: %v", err)
	}
	// A string holding brackets or digits is not nesting or a number.
	if _, err := structout.Compile([]byte(`{"description":"[[[[ 1e99999999 \"{{{{","type":"string"}`)); err != nil {
		t.Errorf("brackets in a string: %v", err)
	}
}

// TestNoLoaders: a schema reads nothing outside itself. A $ref, $schema
// or $id that leads to a file or a URL is an error, even when the file
// is a valid schema (it was read: an existence oracle, and a FIFO hung
// the request); references inside the schema work.
func TestNoLoaders(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "s.json")
	if err := os.WriteFile(file, []byte(`{"type":"string"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, schema := range []string{
		`{"$ref":"file://` + file + `"}`,
		`{"$ref":"` + file + `"}`,
		`{"$ref":"file://` + fifo + `"}`,
		`{"$id":"file://` + dir + `/","$ref":"s.json"}`,
		`{"properties":{"a":{"$ref":"s.json"}}}`,
		`{"$schema":"file://` + file + `"}`,
		`{"$ref":"http://127.0.0.1:1/s.json"}`,
	} {
		done := make(chan error, 1)
		go func() {
			_, err := structout.Compile([]byte(schema))
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("%s compiled: it read outside the schema", schema)
			} else if strings.Contains(err.Error(), dir) && !strings.Contains(err.Error(), "only references inside the schema") {
				t.Errorf("%s: %v", schema, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: compiling hung", schema)
		}
	}
	s, err := structout.Compile([]byte(`{"$ref":"#/$defs/a","$defs":{"a":{"type":"object","properties":{"next":{"$ref":"#/$defs/a"},"v":{"$ref":"#v"}}},"b":{"$anchor":"v","type":"integer"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate([]byte(`{"next":{"next":{"v":3}}}`)); err != nil {
		t.Errorf("a valid answer: %v", err)
	}
	if err := s.Validate([]byte(`{"next":{"v":"x"}}`)); err == nil || !strings.Contains(err.Error(), "/properties/v") || !strings.Contains(err.Error(), `want "integer"`) {
		t.Errorf("an invalid answer: %v", err)
	}
}

// TestValidationBounded: an answer whose check would take exponential
// work is refused before the validator starts (it took 88 s and 4.4 GB);
// one under the limit is checked; an answer over the size, depth or
// number limits is refused; the error a model is shown stays short.
func TestValidationBounded(t *testing.T) {
	t.Parallel()
	s, err := structout.Compile([]byte(bomb(40)))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate([]byte(`5`)); !errors.Is(err, structout.ErrTooCostly) {
		t.Errorf("the bomb's answer: %v", err)
	}
	small, err := structout.Compile([]byte(bomb(8)))
	if err != nil {
		t.Fatal(err)
	}
	err = small.Validate([]byte(`5`))
	if err == nil || errors.Is(err, structout.ErrTooCostly) || len(err.Error()) > 2100 || !strings.Contains(err.Error(), `want "string"`) {
		t.Errorf("a small bomb's invalid answer: %v", err)
	}
	if err := small.Validate([]byte(`"x"`)); err != nil {
		t.Errorf("a small bomb's valid answer: %v", err)
	}
	r, err := structout.Compile([]byte(realistic))
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct{ answer, want string }{
		"size":     {string(bigAnswer(structout.MaxAnswerBytes + 1000)), "over the limit"},
		"depth":    {strings.Repeat("[", 300) + strings.Repeat("]", 300), "nested more than 256"},
		"exponent": {`{"summary":"x","items":[{"name":"n","price":1e999999,"kind":"book","tags":[],"meta":null}]}`, "exponent"},
		"not JSON": {`{"summary":`, "not JSON"},
	} {
		if err := r.Validate([]byte(tc.answer)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}

// TestRealisticAnswersFit: a real schema's answer at the size limit is
// well within the work limit (the bound is never what refuses it).
func TestRealisticAnswersFit(t *testing.T) {
	t.Parallel()
	r, err := structout.Compile([]byte(realistic))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Validate(bigAnswer(structout.MaxAnswerBytes)); err != nil {
		t.Errorf("a valid answer at the size limit: %v", err)
	}
}
