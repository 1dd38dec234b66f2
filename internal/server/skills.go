package server

import (
	"maps"
	"net/http"
	"path/filepath"
	"strings"

	"github.com/agentd/agentd/internal/command"
	"github.com/agentd/agentd/internal/skill"
)

// Skills, as opencode serves them: listed for a directory (GET /skill,
// GET /api/skill), and offered as commands (source "skill") under the
// names no command takes, so that the TUI's /skills dialog can run one.

// skillsOf returns the skills of dir (none without a catalog).
func (s *Server) skillsOf(dir string) []skill.Skill {
	if s.cfg.Skills == nil {
		return []skill.Skill{}
	}
	return s.cfg.Skills.For(dir)
}

func (s *Server) listSkills(w http.ResponseWriter, r *http.Request) *apiError {
	dir, e := s.directory(r)
	if e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, s.skillsOf(dir))
	return nil
}

// commandsFor returns the commands of dir and, under the names still
// free, its skills as commands whose text is the skill's.
func (s *Server) commandsFor(dir string) command.Set {
	set := s.cfg.Commands.For(dir)
	skills := s.skillsOf(dir)
	if len(skills) == 0 {
		return set
	}
	out := maps.Clone(set)
	for _, sk := range skills {
		if _, taken := out[sk.Name]; taken {
			continue
		}
		out[sk.Name] = command.Command{Name: sk.Name, Description: sk.Description, Source: "skill", Project: sk.Project,
			Template: sk.Content + "\n\nBase directory for this skill: " + filepath.Dir(sk.Location) +
				"\nRelative paths in this skill (e.g., scripts/, references/) are relative to this base directory."}
	}
	return out
}

// commandText is the prompt a command sends: its template filled with the
// arguments; a skill's text (not a template: a $1 in it is the skill's own)
// with the arguments after it.
func commandText(c command.Command, args string) string {
	if c.Source != "skill" {
		return command.Expand(c.Template, args)
	}
	if args = strings.TrimSpace(args); args != "" {
		return c.Template + "\n\n" + args
	}
	return c.Template
}
