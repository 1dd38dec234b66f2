package shell

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// maxExpansions bounds how many strings one word is expanded to when its
// paths are checked (braces and variables with several possible values);
// a word past it is left unexpanded, like one known only at run time.
const maxExpansions = 64

// Literal is the value of a word with its quotes removed, and whether the
// word is literal: no parameter, command, arithmetic or process
// substitution. ANSI-C quotes ($'…') are decoded as bash does; globs and
// braces are kept as written.
func Literal(w *syntax.Word) (string, bool) {
	var b strings.Builder
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			b.WriteString(unescape(p.Value, false))
		case *syntax.SglQuoted:
			b.WriteString(sglValue(p))
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok {
					return "", false
				}
				b.WriteString(unescape(l.Value, true))
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}

// sglValue is the value of a single-quoted string: as written, or decoded
// for $'…'.
func sglValue(q *syntax.SglQuoted) string {
	if q.Dollar {
		return ansiC(q.Value)
	}
	return q.Value
}

// unescape removes the backslashes bash removes: before any character
// outside quotes, before $ ` " \ and newline inside double quotes.
func unescape(s string, quoted bool) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			next := s[i+1]
			if !quoted || strings.IndexByte("$`\"\\\n", next) >= 0 {
				i++
				if next != '\n' {
					b.WriteByte(next)
				}
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

var ansiSimple = sync.OnceValue(func() map[byte]string {
	return map[byte]string{
		'a': "\a", 'b': "\b", 'e': "\x1b", 'E': "\x1b", 'f': "\f", 'n': "\n", 'r': "\r",
		't': "\t", 'v': "\v", '\\': "\\", '\'': "'", '"': "\"", '?': "?",
	}
})

// ansiC decodes the escapes of bash's $'…' quoting, so that $'\x72m' is
// judged as the rm it runs.
func ansiC(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		c := s[i]
		if r, ok := ansiSimple()[c]; ok {
			b.WriteString(r)
			continue
		}
		switch {
		case c >= '0' && c <= '7':
			n, l := digits(s[i:], 3, 8)
			b.WriteByte(byte(n))
			i += l - 1
		case c == 'x' || c == 'u' || c == 'U':
			width := map[byte]int{'x': 2, 'u': 4, 'U': 8}[c]
			n, l := digits(s[i+1:], width, 16)
			if l == 0 {
				b.WriteByte('\\')
				b.WriteByte(c)
				continue
			}
			if c == 'x' {
				b.WriteByte(byte(n))
			} else {
				b.WriteRune(rune(n))
			}
			i += l
		case c == 'c' && i+1 < len(s):
			i++
			b.WriteByte(s[i] & 0x1f)
		default:
			b.WriteByte('\\')
			b.WriteByte(c)
		}
	}
	return strings.ToValidUTF8(b.String(), string(utf8.RuneError))
}

// digits reads at most max digits of base from the start of s.
func digits(s string, max, base int) (int, int) {
	l := 0
	for l < max && l < len(s) {
		if _, err := strconv.ParseUint(s[l:l+1], base, 8); err != nil {
			break
		}
		l++
	}
	if l == 0 {
		return 0, 0
	}
	n, _ := strconv.ParseUint(s[:l], base, 64)
	return int(n), l
}

// braces is the words a word becomes by brace expansion ({a,b}, {1..3}),
// or the word itself when it has none; nil when there would be more than
// maxExpansions. The word is not changed.
func braces(w *syntax.Word) []*syntax.Word {
	cp := &syntax.Word{Parts: slices.Clone(w.Parts)}
	if !syntax.SplitBraces(cp) {
		return []*syntax.Word{w}
	}
	var out []*syntax.Word
	for x, err := range expand.BracesSeq(nil, cp) {
		if err != nil || len(out) == maxExpansions {
			return nil
		}
		out = append(out, x)
	}
	return out
}

// product joins every string of a with every string of b, nil when the
// result would be too large.
func product(a, b []string) []string {
	if len(a)*len(b) > maxExpansions {
		return nil
	}
	out := make([]string, 0, len(a)*len(b))
	for _, x := range a {
		for _, y := range b {
			out = append(out, x+y)
		}
	}
	return out
}

// expand is what a word can expand to as far as the script shows: its
// braces, a leading tilde (~, ~user, ~+, ~-) and the variables the scope
// knows substituted. Unquoted variables are also split into fields. It
// reports false when a part is only known at run time (command or
// arithmetic substitutions, variables set by commands).
func (sc *scope) expand(w *syntax.Word) ([]string, bool) {
	words := braces(w)
	if words == nil || *sc.budget < len(words) {
		return nil, false
	}
	var out []string
	for _, x := range words {
		vals, ok := sc.expandOne(x)
		if !ok || len(out)+len(vals) > maxExpansions {
			return nil, false
		}
		out = append(out, vals...)
	}
	if *sc.budget < len(out) {
		return nil, false
	}
	*sc.budget -= len(out)
	return out, true
}

func (sc *scope) expandOne(w *syntax.Word) ([]string, bool) {
	out := []string{""}
	split := false
	for i, part := range w.Parts {
		var alts []string
		switch p := part.(type) {
		case *syntax.Lit:
			v := unescape(p.Value, false)
			if i == 0 && strings.HasPrefix(p.Value, "~") {
				alts = sc.tilde(v)
			} else {
				alts = []string{v}
			}
		case *syntax.SglQuoted:
			alts = []string{sglValue(p)}
		case *syntax.DblQuoted:
			var ok bool
			if alts, ok = sc.expandQuoted(p); !ok {
				return nil, false
			}
		case *syntax.ParamExp:
			var ok bool
			if alts, ok = sc.param(p); !ok {
				return nil, false
			}
			split = true
		default:
			return nil, false
		}
		if out = product(out, alts); out == nil {
			return nil, false
		}
	}
	if split {
		for _, v := range slices.Clone(out) {
			if f := strings.Fields(v); len(f) > 1 && len(out)+len(f) <= maxExpansions {
				out = append(out, f...)
			}
		}
	}
	return out, true
}

func (sc *scope) expandQuoted(q *syntax.DblQuoted) ([]string, bool) {
	out := []string{""}
	for _, part := range q.Parts {
		var alts []string
		switch p := part.(type) {
		case *syntax.Lit:
			alts = []string{unescape(p.Value, true)}
		case *syntax.ParamExp:
			var ok bool
			if alts, ok = sc.param(p); !ok {
				return nil, false
			}
		default:
			return nil, false
		}
		if out = product(out, alts); out == nil {
			return nil, false
		}
	}
	return out, true
}

// param is the values of $name or ${name}; other expansions are only
// known at run time.
func (sc *scope) param(p *syntax.ParamExp) ([]string, bool) {
	if p.Param == nil || p.Excl || p.Length || p.Index != nil || p.Slice != nil || p.Repl != nil ||
		p.Exp != nil || p.Names != 0 || p.NestedParam != nil {
		return nil, false
	}
	return sc.lookup(p.Param.Value)
}

// tilde expands a word's leading tilde prefix as bash does: ~ is HOME, ~+
// the working directory, ~- the previous one, ~user that user's home. A
// prefix that does not expand is kept as written.
func (sc *scope) tilde(v string) []string {
	prefix, rest, slash := strings.Cut(v[1:], "/")
	var homes []string
	switch prefix {
	case "":
		homes, _ = sc.lookup("HOME")
	case "+":
		homes, _ = sc.lookup("PWD")
	case "-":
		homes, _ = sc.lookup("OLDPWD")
	default:
		if h := userHome(prefix); h != "" {
			homes = []string{h}
		}
	}
	homes = slices.DeleteFunc(slices.Clone(homes), func(h string) bool { return h == "" })
	if len(homes) == 0 {
		return []string{v}
	}
	if slash {
		rest = "/" + rest
	}
	return product(homes, []string{rest})
}
