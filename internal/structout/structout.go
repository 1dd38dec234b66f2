// Package structout compiles the JSON schema of a prompt's structured
// output and checks the model's answers against it, within bounds: a
// client's schema and a model's answer must not be able to make the
// server spend minutes or gigabytes, nor read anything but the schema.
//
// google/jsonschema-go does the work (it is in the binary already, and,
// unlike the library used before, compiles no metaschema at package
// init); this package puts limits around it, each checked before the
// work it bounds:
//
//   - the schema: at most MaxSchemaBytes, nested at most MaxSchemaDepth
//     deep, numbers short enough to parse at once, $schema one of the
//     drafts the library validates (draft-07, 2020-12);
//   - references: only inside the schema. Every $ref must be a fragment
//     ("#/$defs/x", "#name"), $id is allowed only at the root, and the
//     resolver's loader refuses everything, so a $ref, $schema or $id
//     that leads to a file or URL is an error, never a read (a file $ref
//     was an existence oracle, a FIFO hung the request). A reference
//     cycle that stays at one place in the answer ({"$ref":"#"}) is
//     refused: the validator would recurse until the stack overflows;
//   - the answer: at most MaxAnswerBytes, MaxAnswerDepth, short numbers;
//   - the validation's work: before validating, an estimate walks the
//     answer with the schema the way the validator will (every branch of
//     anyOf, oneOf, if/then/else, every reference followed) and adds up
//     what each step costs; over MaxWork the answer is refused unchecked.
//     Shared $defs make a small schema describe an exponential number of
//     paths (a 1.3 KB schema of 20 nested anyOf took 2.4 s and built a
//     139 MB error; 30 would take hours): the estimate stops at the
//     budget, so neither it nor the validator goes further.
package structout

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// Limits of a schema and of an answer, far above what a real structured
// output needs (a large real schema is a few KB deep a dozen levels).
const (
	MaxSchemaBytes = 64 << 10
	MaxSchemaDepth = 64
	MaxAnswerBytes = 512 << 10
	MaxAnswerDepth = 256
	// MaxNumberChars bounds a number literal, and maxExponentDigits its
	// exponent: the validator parses numbers into big.Rat, whose cost
	// grows with the digits and the exponent (1e1000000 takes 24 ms).
	MaxNumberChars    = 400
	maxExponentDigits = 3
	// MaxWork bounds the validation of one answer, in the estimate's
	// units (about one schema evaluation each; see cost.go).
	MaxWork = 500_000
	// maxMessage bounds the error text a model or client is shown, and
	// maxFindings the validation errors it names.
	maxMessage = 2000
)

// ErrTooCostly is returned for an answer whose validation would exceed
// MaxWork.
var ErrTooCostly = errors.New("checking the answer against this schema would take too much work")

// base is the schema's own URL: every relative reference resolves below
// it, into a scheme no loader serves.
const base = "mem:///schema.json"

// drafts are the $schema values the validator knows; any other would be
// validated as 2020-12 or refused at validation, so Compile refuses it.
var drafts = map[string]bool{
	"": true,
	"http://json-schema.org/draft-07/schema#":      true,
	"https://json-schema.org/draft-07/schema#":     true,
	"https://json-schema.org/draft/2020-12/schema": true,
}

// Schema is a compiled structured-output schema.
type Schema struct {
	r    *jsonschema.Resolved
	cost *coster
}

// Compile checks and compiles a structured-output schema.
func Compile(raw []byte) (*Schema, error) {
	if len(raw) > MaxSchemaBytes {
		return nil, fmt.Errorf("%d bytes is over the limit of %d bytes", len(raw), MaxSchemaBytes)
	}
	if err := scan(raw, MaxSchemaDepth); err != nil {
		return nil, err
	}
	var root jsonschema.Schema
	if err := json.Unmarshal(raw, &root); err != nil {
		return nil, fmt.Errorf("not a JSON schema: %v", short(err.Error()))
	}
	if !drafts[root.Schema] {
		return nil, errors.New("$schema: only draft-07 and draft 2020-12 are supported")
	}
	cost, err := newCoster(&root)
	if err != nil {
		return nil, err
	}
	r, err := root.Resolve(&jsonschema.ResolveOptions{BaseURI: base, Loader: noLoader})
	if err != nil {
		return nil, errors.New(short(err.Error()))
	}
	return &Schema{r: r, cost: cost}, nil
}

// Validate checks an answer: nil when it matches the schema; else an
// error to show the model (bounded in size), ErrTooCostly among them.
func (s *Schema) Validate(answer []byte) error {
	if len(answer) > MaxAnswerBytes {
		return fmt.Errorf("the answer is %d bytes, over the limit of %d bytes", len(answer), MaxAnswerBytes)
	}
	if err := scan(answer, MaxAnswerDepth); err != nil {
		return fmt.Errorf("the answer: %v", err)
	}
	var inst any
	if err := json.Unmarshal(answer, &inst); err != nil {
		return fmt.Errorf("the answer is not JSON: %v", err)
	}
	if !s.cost.within(inst, MaxWork) {
		return ErrTooCostly
	}
	if err := s.r.Validate(inst); err != nil {
		return errors.New(short(err.Error()))
	}
	return nil
}

// noLoader refuses every document the schema names outside itself.
// Compile already refuses every $ref that is not a fragment; this is the
// second lock.
func noLoader(u *url.URL) (*jsonschema.Schema, error) {
	return nil, fmt.Errorf("only references inside the schema are allowed, not %s", u)
}

// short flattens and cuts an error message.
func short(msg string) string {
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) > maxMessage {
		msg = strings.ToValidUTF8(msg[:maxMessage], "") + "…"
	}
	return msg
}

// scan checks what the JSON parser and the validator would pay for
// before they pay it: the nesting depth and the size of numbers. It does
// not check that data is JSON; the parser does.
func scan(data []byte, maxDepth int) error {
	depth, inString := 0, false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch {
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			if depth++; depth > maxDepth {
				return fmt.Errorf("nested more than %d levels deep", maxDepth)
			}
		case c == '}' || c == ']':
			depth--
		case c == '-' || c >= '0' && c <= '9':
			n, err := number(data[i:])
			if err != nil {
				return err
			}
			i += n - 1
		}
	}
	return nil
}

// number measures the number literal at the start of data and refuses
// one too long or with too large an exponent.
func number(data []byte) (int, error) {
	n, exp := 0, -1
	for n < len(data) && strings.IndexByte("+-.0123456789eE", data[n]) >= 0 {
		if data[n] == 'e' || data[n] == 'E' {
			exp = 0
		} else if exp >= 0 && data[n] >= '0' && data[n] <= '9' {
			exp++
		}
		n++
	}
	if n > MaxNumberChars {
		return n, fmt.Errorf("a number of %d characters is over the limit of %d", n, MaxNumberChars)
	}
	if exp > maxExponentDigits {
		return n, fmt.Errorf("the number %s has an exponent over %d digits", data[:n], maxExponentDigits)
	}
	return n, nil
}
