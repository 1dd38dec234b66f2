package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/agentd/agentd/internal/mcp"
)

// Problem is one thing wrong (or only ignored) in a configuration file,
// with where it is.
type Problem struct {
	File      string
	Line, Col int
	// Key is the dotted path of the key, as "agent.build.modle".
	Key string
	Msg string
}

func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", p.Line, p.Col)
	}
	b.WriteString(": ")
	if p.Key != "" {
		b.WriteString(p.Key + ": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Error lists every problem found in the configuration files; one is
// enough to refuse them.
type Error struct {
	Problems []Problem
}

func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	if len(lines) == 1 {
		return "configuration: " + lines[0]
	}
	return fmt.Sprintf("configuration: %d problems:\n  %s", len(lines), strings.Join(lines, "\n  "))
}

// ignored names, per type, the keys opencode defines that agentd reads
// without acting on them: an opencode file pasted in stays valid, and the
// start-up log says what has no effect. Other unknown keys are refused.
var ignored = map[reflect.Type][]string{
	reflect.TypeFor[File](): {"attachment", "autoshare", "autoupdate", "compaction", "default_agent",
		"disabled_providers", "enabled_providers", "enterprise", "experimental", "formatter", "keybinds",
		"layout", "logLevel", "lsp", "mode", "reference", "references", "server", "share", "shell",
		"skills", "subagent_depth", "theme", "tool_output", "tui", "username", "watcher"},
	reflect.TypeFor[Provider]():        {"api", "env", "id", "whitelist", "blacklist"},
	reflect.TypeFor[ProviderOptions](): {"enterpriseUrl", "setCacheKey", "headerTimeout", "chunkTimeout"},
	reflect.TypeFor[Model](): {"experimental", "family", "headers", "interleaved",
		"provider", "reasoning", "release_date", "status", "temperature", "tool_call"},
	reflect.TypeFor[AgentConfig]():   {"color", "options"},
	reflect.TypeFor[CommandConfig](): {"variant"},
	reflect.TypeFor[mcp.Server]():    {"oauth"},
}

// silent are keys accepted without a word: they describe the file, not
// the server.
var silent = map[string]bool{"$schema": true}

// checker walks a JSON document along the Go type it decodes into,
// noting keys that type does not have.
type checker struct {
	dec      *json.Decoder
	data     []byte
	file     string
	pos      func(off int) (line, col int)
	problems []Problem
	warnings []Problem
}

// checkKeys reports the unknown keys of a configuration document (as
// problems) and the ignored opencode ones (as warnings). pos maps an
// offset of data to a line and column of the file as written.
func checkKeys(file string, data []byte, pos func(int) (int, int)) (problems, warnings []Problem, err error) {
	c := &checker{dec: json.NewDecoder(strings.NewReader(string(data))), data: data, file: file, pos: pos}
	c.dec.UseNumber()
	if err := c.value(reflect.TypeFor[File](), ""); err != nil {
		return nil, nil, err
	}
	return c.problems, c.warnings, nil
}

// at returns where the next token after offset off starts.
func (c *checker) at(off int) (int, int) {
	for off < len(c.data) && strings.IndexByte(" \t\r\n,:", c.data[off]) >= 0 {
		off++
	}
	return c.pos(off)
}

func (c *checker) value(t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[json.RawMessage]() || t.Kind() == reflect.Interface {
		return c.skip()
	}
	switch t.Kind() {
	case reflect.Struct:
		return c.object(path, func(key string, line, col int) error {
			if f, ok := fieldOf(t, key); ok {
				return c.value(f.Type, join(path, key))
			}
			switch {
			case silent[key] && path == "":
			case slices.Contains(ignored[t], key):
				c.warnings = append(c.warnings, Problem{File: c.file, Line: line, Col: col, Key: join(path, key),
					Msg: "an opencode setting agentd does not use; it has no effect"})
			default:
				c.problems = append(c.problems, Problem{File: c.file, Line: line, Col: col, Key: join(path, key),
					Msg: unknown(key, t)})
			}
			return c.skip()
		})
	case reflect.Map:
		return c.object(path, func(key string, _, _ int) error {
			return c.value(t.Elem(), join(path, key))
		})
	case reflect.Slice:
		tok, err := c.dec.Token()
		if err != nil || tok != json.Delim('[') {
			return err // the decoder reports a wrong type with its position
		}
		for i := 0; c.dec.More(); i++ {
			if err := c.value(t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		_, err = c.dec.Token()
		return err
	}
	return c.skip()
}

// object reads an object, calling each for its keys; a value of another
// kind is left for the decoder, which reports its type with a position.
func (c *checker) object(path string, each func(key string, line, col int) error) error {
	tok, err := c.dec.Token()
	if err != nil {
		return err
	}
	if tok != json.Delim('{') {
		if d, ok := tok.(json.Delim); ok {
			// An array where an object belongs: skip its content.
			return c.rest(d)
		}
		return nil
	}
	for c.dec.More() {
		before := int(c.dec.InputOffset())
		tok, err := c.dec.Token()
		if err != nil {
			return err
		}
		line, col := c.at(before)
		if err := each(tok.(string), line, col); err != nil {
			return err
		}
	}
	_, err = c.dec.Token()
	return err
}

// skip reads one whole value.
func (c *checker) skip() error {
	tok, err := c.dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); ok {
		return c.rest(d)
	}
	return nil
}

// rest reads the remainder of an object or array whose opening was read.
func (c *checker) rest(open json.Delim) error {
	depth := 1
	for depth > 0 {
		tok, err := c.dec.Token()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return io.ErrUnexpectedEOF
			}
			return err
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// fieldOf finds the field a key names, by its exact json tag: Go's
// decoder would also take "MODEL" for "model", a spelling opencode
// refuses.
func fieldOf(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if name := jsonName(f); name != "" && name == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func jsonName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	tag := f.Tag.Get("json")
	if tag == "-" {
		return ""
	}
	name, _, _ := strings.Cut(tag, ",")
	if name == "" {
		name = f.Name
	}
	return name
}

// unknown says a key is not known and names the nearest known one, or
// lists them all when none is near.
func unknown(key string, t reflect.Type) string {
	var known []string
	for i := range t.NumField() {
		if n := jsonName(t.Field(i)); n != "" {
			known = append(known, n)
		}
	}
	if near := Nearest(key, known); near != "" {
		return fmt.Sprintf("unknown key %q (did you mean %q?)", key, near)
	}
	sort.Strings(known)
	return fmt.Sprintf("unknown key %q (known here: %s)", key, strings.Join(known, ", "))
}

// Nearest returns the candidate closest to s in edits (case ignored, a
// swap of neighbours one edit), or "" when none is close enough to be
// what was meant.
func Nearest(s string, candidates []string) string {
	best, bestD := "", 1<<30
	for _, c := range candidates {
		if d := distance(strings.ToLower(s), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	limit := max(1, min(3, utf8.RuneCountInString(s)/3))
	if bestD > limit {
		return ""
	}
	return best
}

// distance is the optimal string alignment distance of a and b.
func distance(a, b string) int {
	x, y := []rune(a), []rune(b)
	d := make([][]int, len(x)+1)
	for i := range d {
		d[i] = make([]int, len(y)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(x); i++ {
		for j := 1; j <= len(y); j++ {
			cost := 1
			if x[i-1] == y[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && x[i-1] == y[j-2] && x[i-2] == y[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(x)][len(y)]
}
