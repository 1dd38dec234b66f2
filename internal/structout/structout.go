// Package structout compiles the JSON schema of a prompt's structured
// output and checks the model's answers against it, within bounds: a
// client's schema and a model's answer must not be able to make the
// server spend minutes or gigabytes, nor read anything but the schema.
//
// santhosh-tekuri/jsonschema does the work; this package puts limits
// around it, each checked before the work it bounds:
//
//   - the schema: at most MaxSchemaBytes, nested at most MaxSchemaDepth
//     deep (the library's compile time grows with the cube of the depth:
//     800 levels took 2 s), numbers short enough to parse at once;
//   - references: only inside the schema. No loader is installed, so a
//     $ref, $schema or $id that leads to a file or URL is an error, never
//     a read (a file $ref was an existence oracle, a FIFO hung the
//     request);
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
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
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
	maxMessage  = 2000
	maxFindings = 5
)

// ErrTooCostly is returned for an answer whose validation would exceed
// MaxWork.
var ErrTooCostly = errors.New("checking the answer against this schema would take too much work")

// base is the schema's own URL: every relative reference resolves below
// it, into a scheme no loader serves.
const base = "mem:///schema.json"

// Schema is a compiled structured-output schema.
type Schema struct {
	s    *jsonschema.Schema
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
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	if err := c.AddResource(base, doc); err != nil {
		return nil, errors.New(short(err.Error()))
	}
	s, err := c.Compile(base)
	if err != nil {
		return nil, errors.New(short(err.Error()))
	}
	cost := newCoster(s)
	if cost.dynamic {
		return nil, errors.New("$dynamicRef and $recursiveRef are not supported in a structured-output schema")
	}
	return &Schema{s: s, cost: cost}, nil
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
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(answer))
	if err != nil {
		return fmt.Errorf("the answer is not JSON: %v", err)
	}
	if !s.cost.within(inst, MaxWork) {
		return ErrTooCostly
	}
	if err := s.s.Validate(inst); err != nil {
		return describe(err)
	}
	return nil
}

// describe says what is wrong with an answer: the first few of the
// validator's findings, not its whole tree, which can hold one entry per
// evaluation (printing it all was what took gigabytes).
func describe(err error) error {
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return errors.New(short(err.Error()))
	}
	p := message.NewPrinter(language.English)
	var found []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(found) == maxFindings {
			return
		}
		if len(e.Causes) == 0 {
			found = append(found, fmt.Sprintf("at '/%s': %s", strings.Join(e.InstanceLocation, "/"), e.ErrorKind.LocalizedString(p)))
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(verr)
	return errors.New(short(strings.Join(found, "; ")))
}

// noLoader refuses every document the schema names outside itself.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("only references inside the schema are allowed, not %s", url)
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
