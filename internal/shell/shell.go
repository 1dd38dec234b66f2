// Package shell reads a bash command the way permission rules need it: as
// the simple commands it would run — in lists, pipelines, subshells,
// functions, command and process substitutions, and the literal scripts of
// bash -c and eval — and the files its redirections and arguments name.
// It never runs anything; a command it cannot parse is an error, which
// callers treat as a reason to ask.
package shell

import (
	"errors"
	"fmt"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// MaxLen is the longest command Parse reads; longer ones are refused
// rather than judged.
const MaxLen = 64 << 10

// maxDepth bounds how deep the scripts of bash -c and eval are followed.
const maxDepth = 4

// Script is what a command would run and touch.
type Script struct {
	// Commands are the simple commands in source order, the nested ones
	// (substitutions, bash -c scripts) included.
	Commands []Command
	// Redirects are the files the command's redirections name.
	Redirects []Redirect
}

// Command is one simple command.
type Command struct {
	// Text is the command as written: its assignments and words joined by
	// one space, redirections left out (they are judged on their own).
	Text string
	// Pattern is what rules are matched against: Text with the literal
	// words' quotes and escapes removed, so that "rm" '-rf' and rm -rf
	// meet the same rules.
	Pattern string
	// Words are the literal values of the words, quotes removed; a word
	// that expands at run time ($VAR, $(…), globs aside) is "" and marked
	// in Dynamic.
	Words   []string
	Dynamic []bool
	// Assigns is set when variables are assigned for the command alone
	// (PATH=… cmd), which can change what it runs.
	Assigns bool
}

// Redirect is one redirection to or from a file.
type Redirect struct {
	// Target is the literal file name, or "" when it expands at run time.
	Target string
	// Text is the target as written.
	Text string
	// Write is set for redirections that create or change the file.
	Write bool
}

// ErrTooLong is returned for commands over MaxLen bytes.
var ErrTooLong = fmt.Errorf("command is longer than %d bytes", MaxLen)

// Parse reads src as bash.
func Parse(src string) (*Script, error) {
	if len(src) > MaxLen {
		return nil, ErrTooLong
	}
	s := &Script{}
	if err := s.add(src, 0); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Script) add(src string, depth int) error {
	if depth > maxDepth {
		return errors.New("scripts nested too deep")
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
	if err != nil {
		return err
	}
	var inner []string
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.CallExpr:
			c := command(src, n)
			if c.Text != "" {
				s.Commands = append(s.Commands, c)
			}
			if script, ok := c.script(); ok {
				inner = append(inner, script)
			}
		case *syntax.DeclClause:
			s.Commands = append(s.Commands, declCommand(src, n))
		case *syntax.Redirect:
			if r, ok := redirect(src, n); ok {
				s.Redirects = append(s.Redirects, r)
			}
		}
		return true
	})
	for _, script := range inner {
		if err := s.add(script, depth+1); err != nil {
			return fmt.Errorf("inner script: %w", err)
		}
	}
	return nil
}

func text(src string, n syntax.Node) string {
	start, end := n.Pos().Offset(), n.End().Offset()
	if start > end || end > uint(len(src)) {
		return ""
	}
	return src[start:end]
}

func command(src string, call *syntax.CallExpr) Command {
	if len(call.Args) == 0 {
		// Assignments alone run nothing; what their values run (command
		// substitutions) is walked on its own.
		return Command{}
	}
	var words, pattern []string
	for _, a := range call.Assigns {
		words = append(words, text(src, a))
		pattern = append(pattern, text(src, a))
	}
	c := Command{Assigns: len(call.Assigns) > 0}
	for _, w := range call.Args {
		t := text(src, w)
		words = append(words, t)
		v, ok := Literal(w)
		if ok {
			pattern = append(pattern, v)
		} else {
			pattern = append(pattern, t)
			v = ""
		}
		c.Words = append(c.Words, v)
		c.Dynamic = append(c.Dynamic, !ok)
	}
	c.Text = strings.Join(words, " ")
	c.Pattern = strings.Join(pattern, " ")
	return c
}

// declCommand reads export, declare, local, readonly and typeset, which
// change the environment of every later command.
func declCommand(src string, d *syntax.DeclClause) Command {
	c := Command{Words: []string{d.Variant.Value}, Dynamic: []bool{false}}
	words := []string{d.Variant.Value}
	for _, a := range d.Args {
		words = append(words, text(src, a))
		c.Words = append(c.Words, "")
		c.Dynamic = append(c.Dynamic, true)
	}
	c.Text = strings.Join(words, " ")
	c.Pattern = c.Text
	return c
}

func redirect(src string, r *syntax.Redirect) (Redirect, bool) {
	switch r.Op {
	case syntax.Hdoc, syntax.DashHdoc, syntax.WordHdoc, syntax.DplIn, syntax.DplOut:
		// Here-documents carry text, not file names; >&2 and <&0 name
		// descriptors (a file name after >& is still caught below).
		if r.Op != syntax.DplOut || r.Word == nil {
			return Redirect{}, false
		}
		if v, ok := Literal(r.Word); ok && (v == "-" || isDigits(v)) {
			return Redirect{}, false
		}
	}
	if r.Word == nil {
		return Redirect{}, false
	}
	out := Redirect{Text: text(src, r.Word), Write: r.Op != syntax.RdrIn}
	if v, ok := Literal(r.Word); ok {
		out.Target = v
	}
	return out, true
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

// Literal is the value of a word with its quotes removed, and whether the
// word is literal: no parameter, command, arithmetic or process
// substitution. Globs and braces are kept as written.
func Literal(w *syntax.Word) (string, bool) {
	var b strings.Builder
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			b.WriteString(unescape(p.Value, false))
		case *syntax.SglQuoted:
			if p.Dollar {
				return "", false
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			if p.Dollar {
				return "", false
			}
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
