// Package command holds custom commands: prompt templates a client runs by
// name (opencode's "command" configuration key and command files), with
// their arguments filled in.
package command

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v4"
)

// Command is one custom command, in opencode's shape.
type Command struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Agent       string `json:"agent,omitempty"`
	Model       string `json:"model,omitempty"`
	Template    string `json:"template"`
	Subtask     bool   `json:"subtask,omitempty"`
	// Source is "command", or "skill" for a skill offered as a command
	// (opencode also lists MCP prompts).
	Source string `json:"source"`
	// Hints are the template's placeholders, for a client to prompt for.
	Hints []string `json:"hints"`
	// Project marks a command read from a project's files (which the
	// model can write): it cannot replace another command, and the agent
	// it names must be one the operator allows (Catalog.Agent).
	Project bool `json:"-"`
}

// Set is the commands by name.
type Set map[string]Command

// List returns the commands sorted by name, with their hints (a skill's
// text is not a template: it has none).
func (s Set) List() []Command {
	out := make([]Command, 0, len(s))
	for _, c := range s {
		if c.Source == "" {
			c.Source = "command"
		}
		c.Hints = []string{}
		if c.Source == "command" {
			c.Hints = Hints(c.Template)
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// frontMatter is what a command file may say about itself.
type frontMatter struct {
	Description string `yaml:"description"`
	Agent       string `yaml:"agent"`
	Model       string `yaml:"model"`
	Subtask     bool   `yaml:"subtask"`
}

// Parse reads a command file: optional YAML front matter between "---"
// lines, then the template.
func Parse(name string, data []byte) (Command, error) {
	c := Command{Name: name}
	body := data
	if rest, ok := bytes.CutPrefix(data, []byte("---\n")); ok {
		fm, tmpl, found := bytes.Cut(rest, []byte("\n---"))
		if !found {
			return c, errors.New("front matter has no closing ---")
		}
		var m frontMatter
		if err := yaml.Unmarshal(fm, &m); err != nil {
			return c, fmt.Errorf("front matter: %w", err)
		}
		c.Description, c.Agent, c.Model, c.Subtask = m.Description, m.Agent, m.Model, m.Subtask
		body = tmpl
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			body = body[i+1:]
		} else {
			body = nil
		}
	}
	c.Template = strings.TrimSpace(string(body))
	if c.Template == "" {
		return c, errors.New("the template is empty")
	}
	return c, nil
}

var positional = regexp.MustCompile(`\$(\d+)`)

// Expand fills the template with the arguments: $ARGUMENTS is all of them,
// $1, $2 … are the words (quotes group words), and the highest-numbered
// one takes the rest of the words. A template with no placeholder gets
// the arguments appended on a line of their own.
func Expand(template, arguments string) string {
	arguments = strings.TrimSpace(arguments)
	words := split(arguments)
	last := 0
	for _, m := range positional.FindAllStringSubmatch(template, -1) {
		if n, _ := strconv.Atoi(m[1]); n > last {
			last = n
		}
	}
	out := positional.ReplaceAllStringFunc(template, func(m string) string {
		n, _ := strconv.Atoi(m[1:])
		switch {
		case n == 0 || n > len(words):
			return ""
		case n == last:
			return strings.Join(words[n-1:], " ")
		default:
			return words[n-1]
		}
	})
	has := positional.MatchString(template) || strings.Contains(template, "$ARGUMENTS")
	out = strings.ReplaceAll(out, "$ARGUMENTS", arguments)
	if !has && arguments != "" {
		out += "\n\n" + arguments
	}
	return out
}

// Hints lists a template's placeholders: $1, $2 … in number order, then
// $ARGUMENTS.
func Hints(template string) []string {
	nums := map[int]bool{}
	for _, m := range positional.FindAllStringSubmatch(template, -1) {
		if n, err := strconv.Atoi(m[1]); err == nil {
			nums[n] = true
		}
	}
	hints := []string{}
	for n := range nums {
		hints = append(hints, "$"+strconv.Itoa(n))
	}
	sort.Slice(hints, func(i, j int) bool {
		a, _ := strconv.Atoi(hints[i][1:])
		b, _ := strconv.Atoi(hints[j][1:])
		return a < b
	})
	if strings.Contains(template, "$ARGUMENTS") {
		hints = append(hints, "$ARGUMENTS")
	}
	return hints
}

// split cuts arguments into words; double or single quotes keep spaces in.
func split(s string) []string {
	var words []string
	var cur strings.Builder
	var quote rune
	inWord := false
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote == 0 && (r == '"' || r == '\''):
			quote, inWord = r, true
		case quote == 0 && (r == ' ' || r == '\t' || r == '\n'):
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}
