package skill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentd/agentd/internal/tool"
)

// Permission is the permission key of loading a skill (opencode's), its
// pattern the skill's name. Nothing asks it by default.
const Permission = "skill"

// ToolName is the name of the skill tool.
const ToolName = "skill"

// maxSampled bounds the files of a skill's folder named to the model, and
// maxVisited the entries looked at to find them.
const (
	maxSampled = 10
	maxVisited = 1000
)

const description = `Load a specialized skill when the user explicitly asks for it, or when the task clearly matches one of the available skills listed below.

For repository- or domain-specific skills, the task must be about that repository or domain. Do not load a skill based only on generic workflow overlap, command names, or tool names in the skill description.

This tool puts the skill's instructions into the conversation. They may describe a detailed workflow and name scripts or files in the skill's folder.

The name must be one of the available skills.`

// Tool is the skill tool: it gives the model the instructions of one of
// the skills of the session's directory, by name.
type Tool struct {
	Catalog *Catalog
}

// Name implements tool.Tool.
func (Tool) Name() string { return ToolName }

// ReadOnly says the tool changes no file.
func (Tool) ReadOnly() bool { return true }

// Description implements tool.Tool: the description without the list of
// skills (a run gets DescribeFor's).
func (Tool) Description() string { return description }

// Schema implements tool.Tool.
func (Tool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","description":"The name of the skill, one of the available skills"}},"required":["name"],"additionalProperties":false}`)
}

// DescribeFor implements tool.Contextual: the description followed by the
// skills of dir whose loading the rules do not deny; "" when there are
// none, so that a run without skills is not offered the tool.
func (t Tool) DescribeFor(dir string, denied func(permission, pattern string) bool) string {
	var b strings.Builder
	for _, s := range t.Catalog.For(dir) {
		if denied != nil && denied(Permission, s.Name) {
			continue
		}
		fmt.Fprintf(&b, "  <skill>\n    <name>%s</name>\n    <description>%s</description>\n    <location>%s</location>\n  </skill>\n",
			escape(s.Name), escape(s.Description), escape(s.Location))
	}
	if b.Len() == 0 {
		return ""
	}
	return description + "\n\n<available_skills>\n" + b.String() + "</available_skills>"
}

var xmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")

func escape(s string) string { return xmlEscaper.Replace(s) }

type input struct {
	Name string `json:"name"`
}

func parseInput(raw json.RawMessage) (string, error) {
	var in input
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return "", fmt.Errorf("invalid input: %v", err)
	}
	if strings.TrimSpace(in.Name) == "" {
		return "", errors.New("name is required: one of the available skills")
	}
	return strings.TrimSpace(in.Name), nil
}

// Needs implements tool.Permissioned: the skill permission, for the
// skill's name.
func (Tool) Needs(call tool.Call) []tool.Need {
	name, err := parseInput(call.Input)
	if err != nil {
		return nil
	}
	return []tool.Need{{Permission: Permission, Patterns: []string{name}, Always: []string{name},
		Title: "Load skill " + name, Metadata: map[string]any{"name": name}}}
}

// Run implements tool.Tool.
func (t Tool) Run(_ context.Context, call tool.Call) (tool.Result, error) {
	name, err := parseInput(call.Input)
	if err != nil {
		return tool.Errorf(err.Error()), nil
	}
	all := t.Catalog.For(call.Directory)
	var s *Skill
	names := make([]string, 0, len(all))
	for i := range all {
		names = append(names, all[i].Name)
		if all[i].Name == name {
			s = &all[i]
		}
	}
	if s == nil {
		avail := strings.Join(names, ", ")
		if avail == "" {
			avail = "none"
		}
		return tool.Errorf(fmt.Sprintf("Skill %q not found. Available skills: %s", name, avail)), nil
	}
	dir := filepath.Dir(s.Location)
	var b strings.Builder
	fmt.Fprintf(&b, "<skill_content name=%q>\n# Skill: %s\n\n%s\n\n", s.Name, s.Name, s.Content)
	fmt.Fprintf(&b, "Base directory for this skill: %s\n", dir)
	b.WriteString("Relative paths in this skill (e.g., scripts/, reference/) are relative to this base directory.\n")
	b.WriteString("Note: file list is sampled.\n\n<skill_files>\n")
	for _, f := range sample(dir) {
		fmt.Fprintf(&b, "<file>%s</file>\n", f)
	}
	b.WriteString("</skill_files>\n</skill_content>")
	return tool.Result{Output: b.String(), Title: "Loaded skill: " + s.Name,
		Metadata: map[string]any{"name": s.Name, "dir": dir}}, nil
}

// sample names up to maxSampled regular files of a skill's folder besides
// its SKILL.md, without following links.
func sample(dir string) []string {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil
	}
	defer root.Close()
	var out []string
	seen := 0
	_ = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if seen++; seen > maxVisited || len(out) >= maxSampled {
			return fs.SkipAll
		}
		if d.IsDir() {
			if d.Name() == ".git" || d.Name() == "node_modules" {
				return fs.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() && p != FileName {
			out = append(out, filepath.Join(dir, filepath.FromSlash(p)))
		}
		return nil
	})
	return out
}
