package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"
)

var envRef = regexp.MustCompile(`\{env:([A-Za-z_][A-Za-z0-9_]*)\}`)

// Parse reads one configuration document; see ParseFile.
func Parse(data []byte) (File, error) {
	f, _, err := ParseFile("agentd.json", data, os.LookupEnv)
	return f, err
}

// ParseFile reads one configuration document strictly: comments (// and
// /* */) and trailing commas are allowed, as in opencode's files; an
// unknown key, a value of the wrong type, a JSON syntax error and an
// {env:VAR} whose variable is unset are refused with the file, line and
// column (*Error). Keys opencode defines and agentd does not use come
// back as warnings. The variables read by {env:…} are noted in EnvRefs:
// they hold what the configuration needs (keys, tokens), which tools
// must not see.
func ParseFile(name string, data []byte, lookup func(string) (string, bool)) (File, []Problem, error) {
	var f File
	if !utf8.Valid(data) {
		return f, nil, &Error{Problems: []Problem{{File: name, Msg: "not UTF-8 text"}}}
	}
	src := string(data)
	text := stripJSONC(src)
	text, shift, refs, unset := substitute(name, text, lookup, func(off int) (int, int) { return lineCol(src, off) })
	pos := func(off int) (int, int) { return lineCol(src, shift(off)) }
	fail := func(off int, key, msg string) (File, []Problem, error) {
		line, col := pos(off)
		return f, nil, &Error{Problems: []Problem{{File: name, Line: line, Col: col, Key: key, Msg: msg}}}
	}
	if strings.TrimSpace(text) == "" {
		return f, nil, nil
	}
	// The key check stops at a syntax error; the decoder then says where.
	problems, warnings, err := checkKeys(name, []byte(text), pos)
	if problems = append(unset, problems...); err == nil && len(problems) > 0 {
		sort.SliceStable(problems, func(i, j int) bool {
			a, b := problems[i], problems[j]
			return a.Line < b.Line || a.Line == b.Line && a.Col < b.Col
		})
		return f, warnings, &Error{Problems: problems}
	}
	err = json.Unmarshal([]byte(text), &f)
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn) && syn.Offset >= int64(len(strings.TrimRight(text, " \t\r\n"))):
		return fail(len(strings.TrimRight(text, " \t\r\n")), "", "JSON: the document ends too early (an object or array is not closed)")
	case errors.As(err, &syn):
		return fail(int(syn.Offset)-1, "", "JSON: "+strings.TrimPrefix(syn.Error(), "json: "))
	case errors.As(err, &typ):
		return fail(valueStart(text, int(typ.Offset)), typ.Field, fmt.Sprintf("want %s, got %s", kindName(typ.Type.String()), typ.Value))
	case err != nil:
		return fail(0, "", "JSON: "+strings.TrimPrefix(err.Error(), "json: "))
	}
	f.EnvRefs = refs
	return f, warnings, nil
}

// valueStart backs up from the offset just past a value to its first
// byte, so that a wrong type points at the value and not past it.
func valueStart(text string, end int) int {
	end = min(end, len(text))
	i := end - 1
	if i < 0 {
		return 0
	}
	switch text[i] {
	case '"':
		for i--; i > 0; i-- {
			if text[i] == '"' && text[i-1] != '\\' {
				return i
			}
		}
		return 0
	case '}', ']':
		depth := 0
		for ; i >= 0; i-- {
			switch text[i] {
			case '}', ']':
				depth++
			case '{', '[':
				depth--
				if depth == 0 {
					return i
				}
			}
		}
		return 0
	}
	for i > 0 && strings.IndexByte(" \t\r\n,:[{", text[i-1]) < 0 {
		i--
	}
	return i
}

func kindName(goType string) string {
	switch {
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "true or false"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "float"), strings.HasPrefix(goType, "uint"):
		return "a number"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case strings.HasPrefix(goType, "map["):
		return "an object"
	}
	return "an object"
}

// lineCol turns a byte offset of text into a 1-based line and column
// (counted in characters).
func lineCol(text string, off int) (int, int) {
	off = max(0, min(off, len(text)))
	before := text[:off]
	line := strings.Count(before, "\n") + 1
	start := strings.LastIndexByte(before, '\n') + 1
	return line, utf8.RuneCountInString(before[start:]) + 1
}

// substitute replaces {env:VAR} with the variable's value (escaped for a
// JSON string). It returns the new text, a function mapping offsets of
// the new text back to the old, the variables read, and a problem for
// each variable that is not set: an empty key sent to a provider fails
// far from its cause.
func substitute(name, text string, lookup func(string) (string, bool), pos func(int) (int, int)) (string, func(int) int, []string, []Problem) {
	type edit struct{ newAt, newEnd, oldAt, oldEnd int }
	var edits []edit
	var refs []string
	var problems []Problem
	var b strings.Builder
	last := 0
	for _, m := range envRef.FindAllStringSubmatchIndex(text, -1) {
		varName := text[m[2]:m[3]]
		refs = append(refs, varName)
		v, ok := lookup(varName)
		if !ok {
			// Refused, but substituted so that the rest is still checked.
			line, col := pos(m[0])
			problems = append(problems, Problem{File: name, Line: line, Col: col,
				Msg: fmt.Sprintf("{env:%s}: the variable %s is not set (set it, or remove the reference)", varName, varName)})
		}
		enc, _ := json.Marshal(v)
		b.WriteString(text[last:m[0]])
		at := b.Len()
		b.Write(enc[1 : len(enc)-1])
		edits = append(edits, edit{newAt: at, newEnd: b.Len(), oldAt: m[0], oldEnd: m[1]})
		last = m[1]
	}
	if len(edits) == 0 {
		return text, func(o int) int { return o }, refs, problems
	}
	b.WriteString(text[last:])
	back := func(o int) int {
		i := sort.Search(len(edits), func(i int) bool { return edits[i].newAt > o }) - 1
		if i < 0 {
			return o
		}
		if e := edits[i]; o < e.newEnd {
			return e.oldAt // inside a substituted value: its reference
		} else {
			return e.oldEnd + (o - e.newEnd)
		}
	}
	return b.String(), back, refs, problems
}

// stripJSONC blanks out comments and then trailing commas with spaces,
// so that offsets (and so lines and columns) stay those of the file.
func stripJSONC(s string) string {
	b := []byte(s)
	scan(b, func(i int) int {
		switch {
		case b[i] == '/' && i+1 < len(b) && b[i+1] == '/':
			for ; i < len(b) && b[i] != '\n'; i++ {
				b[i] = ' '
			}
			return i
		case b[i] == '/' && i+1 < len(b) && b[i+1] == '*':
			end := strings.Index(string(b[i+2:]), "*/")
			stop := len(b)
			if end >= 0 {
				stop = i + 2 + end + 2
			}
			for j := i; j < stop; j++ {
				if b[j] != '\n' {
					b[j] = ' '
				}
			}
			return stop - 1
		}
		return i
	})
	scan(b, func(i int) int {
		if b[i] == ',' {
			j := i + 1
			for j < len(b) && strings.IndexByte(" \t\r\n", b[j]) >= 0 {
				j++
			}
			if j < len(b) && (b[j] == '}' || b[j] == ']') {
				b[i] = ' '
			}
		}
		return i
	})
	return string(b)
}

// scan calls at for each byte outside JSON strings; at returns the last
// byte it consumed.
func scan(b []byte, at func(i int) int) {
	inString := false
	for i := 0; i < len(b); i++ {
		switch {
		case inString && b[i] == '\\':
			i++
		case inString:
			inString = b[i] != '"'
		case b[i] == '"':
			inString = true
		default:
			i = at(i)
		}
	}
}
