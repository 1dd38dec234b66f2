// Package skill holds skills: SKILL.md files (opencode's and Claude's
// format: YAML front matter with a name and a description, then markdown
// instructions) that the model loads by name with the skill tool, and that
// clients list (GET /skill) and run as commands.
//
// A skill only adds instructions, as AGENTS.md and command files do: what
// its front matter says besides its name and description (allowed tools, a
// model, a license) is ignored, so a project's SKILL.md, which the model
// can write, cannot widen what the operator allows.
package skill

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v4"
)

// Skill is one skill, in opencode's shape (GET /skill).
type Skill struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Location is the path of its SKILL.md.
	Location string `json:"location"`
	// Content is the markdown after the front matter.
	Content string `json:"content"`
	// Project marks a skill read from a project's folders (which the
	// model can write): it cannot replace a global one of the same name.
	Project bool `json:"-"`
}

// FileName is the name of a skill's file.
const FileName = "SKILL.md"

// maxNameBytes bounds a skill's name, which becomes a permission pattern
// and a command name.
const maxNameBytes = 128

// Parse reads a SKILL.md: front matter between "---" lines holding at
// least name and description (strings), then the instructions. Front
// matter that is not valid YAML (an unquoted colon in a description is
// common in the wild) is read as "key: value" lines, as opencode does.
func Parse(data []byte) (Skill, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	data = bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n"))
	rest, ok := bytes.CutPrefix(data, []byte("---\n"))
	if !ok {
		return Skill{}, errors.New("no front matter (a --- line, name: and description:, a --- line)")
	}
	fm, body, found := bytes.Cut(rest, []byte("\n---"))
	if !found {
		return Skill{}, errors.New("front matter has no closing ---")
	}
	if i := bytes.IndexByte(body, '\n'); i >= 0 {
		body = body[i+1:]
	} else {
		body = nil
	}
	name, desc, err := frontMatter(fm)
	if err != nil {
		return Skill{}, err
	}
	if err := checkName(name); err != nil {
		return Skill{}, err
	}
	if desc == "" {
		return Skill{}, errors.New("front matter has no description")
	}
	return Skill{Name: name, Description: desc, Content: strings.TrimSpace(string(body))}, nil
}

// frontMatter returns the name and description the front matter gives.
func frontMatter(fm []byte) (name, desc string, err error) {
	var m map[string]any
	if yerr := yaml.Unmarshal(fm, &m); yerr == nil {
		n, nok := m["name"].(string)
		d, dok := m["description"].(string)
		if (m["name"] != nil && !nok) || (m["description"] != nil && !dok) {
			return "", "", errors.New("front matter: name and description must be strings")
		}
		return strings.TrimSpace(n), strings.TrimSpace(d), nil
	}
	for _, line := range strings.Split(string(fm), "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok || strings.TrimLeft(key, " \t") != key {
			continue
		}
		val = unquote(strings.TrimSpace(val))
		switch strings.TrimSpace(key) {
		case "name":
			name = val
		case "description":
			desc = val
		}
	}
	if name == "" && desc == "" {
		return "", "", errors.New("front matter is neither YAML nor key: value lines")
	}
	return name, desc, nil
}

func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}

// checkName refuses names that cannot serve as a command name and a
// permission pattern: empty, too long, or holding spaces or control
// characters.
func checkName(name string) error {
	if name == "" {
		return errors.New("front matter has no name")
	}
	if len(name) > maxNameBytes {
		return fmt.Errorf("name is longer than %d bytes", maxNameBytes)
	}
	for _, r := range name {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return fmt.Errorf("name %q holds a space or a control character", name)
		}
	}
	return nil
}
