// Package prompt assembles what agentd tells a model before the
// conversation: its role, the agent's instructions, the project's
// instructions (AGENTS.md and the configured files) and where it works. It
// is the one place the system prompt is built.
package prompt

import (
	"embed"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/vcs"
)

//go:embed text/*.txt
var texts embed.FS

func text(name string) string {
	b, err := texts.ReadFile("text/" + name + ".txt")
	if err != nil {
		panic("prompt: missing text " + name)
	}
	return strings.TrimSpace(string(b))
}

// Base is agentd's own system prompt.
var Base = text("base")

// Title is the system prompt of title requests; it also tells the
// scripted model behind fakellm what a request is for.
var Title = text("title")

// Summary is the system prompt of compaction requests.
var Summary = text("summary")

// maxInstructionBytes bounds one instruction file, so that a runaway file
// cannot fill the context window.
const maxInstructionBytes = 64 << 10

// Instruction is a file whose text joins the system prompt.
type Instruction struct {
	Path string
	Text string
}

// Sources say where instructions come from.
type Sources struct {
	// Directory is the session's workspace.
	Directory string
	// GlobalDir holds the user's global AGENTS.md (~/.config/agentd).
	GlobalDir string
	// Configured are the configuration's instructions: paths or globs,
	// absolute, relative to the workspace, or starting with ~/.
	Configured []string
}

// Instructions reads the instruction files, global first: the user's
// AGENTS.md, the configured files, then the project's AGENTS.md files from
// the repository root down to the workspace (CLAUDE.md where a project has
// no AGENTS.md at all). Files that cannot be read are skipped.
func Instructions(src Sources) []Instruction {
	var out []Instruction
	seen := map[string]bool{}
	add := func(path string) {
		abs, err := filepath.Abs(path)
		if err != nil || seen[abs] {
			return
		}
		st, err := os.Stat(abs)
		if err != nil || !st.Mode().IsRegular() {
			return
		}
		b, err := readLimited(abs)
		if err != nil || len(strings.TrimSpace(string(b))) == 0 {
			return
		}
		seen[abs] = true
		out = append(out, Instruction{Path: abs, Text: strings.TrimSpace(string(b))})
	}
	if src.GlobalDir != "" {
		add(filepath.Join(src.GlobalDir, "AGENTS.md"))
	}
	for _, pat := range src.Configured {
		if strings.HasPrefix(pat, "~/") {
			if h, err := os.UserHomeDir(); err == nil {
				pat = filepath.Join(h, pat[2:])
			}
		}
		if !filepath.IsAbs(pat) {
			pat = filepath.Join(src.Directory, pat)
		}
		matches, err := filepath.Glob(pat)
		if err != nil {
			continue
		}
		sort.Strings(matches)
		for _, m := range matches {
			add(m)
		}
	}
	dirs := projectDirs(src.Directory)
	for _, name := range []string{"AGENTS.md", "CLAUDE.md"} {
		before := len(out)
		for _, d := range dirs {
			add(filepath.Join(d, name))
		}
		if len(out) > before {
			break
		}
	}
	return out
}

// projectDirs lists the directories from the repository root down to dir
// (just dir when it is in no repository).
func projectDirs(dir string) []string {
	if dir == "" {
		return nil
	}
	dir = filepath.Clean(dir)
	root, ok := vcs.Root(dir)
	if !ok {
		return []string{dir}
	}
	var out []string
	for d := dir; ; d = filepath.Dir(d) {
		out = append(out, d)
		if d == root || filepath.Dir(d) == d {
			break
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, maxInstructionBytes)
	n, err := f.Read(b)
	if n == 0 && err != nil {
		return nil, err
	}
	return b[:n], nil
}

// Env is where and when a run works.
type Env struct {
	Directory string
	Date      time.Time
	// Model is provider/model.
	Model string
}

// Environment describes Env for the model.
func Environment(env Env) string {
	var sb strings.Builder
	sb.WriteString("<environment>\n")
	fmt.Fprintf(&sb, "Working directory: %s\n", env.Directory)
	if root, ok := vcs.Root(env.Directory); ok {
		fmt.Fprintf(&sb, "Git repository: yes, root %s", root)
		if b := vcs.Branch(root); b != "" {
			fmt.Fprintf(&sb, ", branch %s", b)
		}
		sb.WriteString("\n")
	} else {
		sb.WriteString("Git repository: no\n")
	}
	fmt.Fprintf(&sb, "Platform: %s/%s\n", runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(&sb, "Today's date: %s\n", env.Date.Format("Monday, 2 January 2006"))
	if env.Model != "" {
		fmt.Fprintf(&sb, "Model: %s\n", env.Model)
	}
	sb.WriteString("</environment>")
	return sb.String()
}

// Parts are the pieces of a run's system prompt.
type Parts struct {
	// Agent is the agent's own prompt.
	Agent        string
	Instructions []Instruction
	Env          Env
	// Extra is the prompt body's system field.
	Extra string
}

// System returns the system prompt in blocks, the most stable first so
// that provider prompt caches hit: agentd's base prompt, the agent's, the
// instructions (each labelled with its path), the environment, and the
// prompt's own system text.
func System(p Parts) []string {
	blocks := []string{Base}
	if p.Agent != "" {
		blocks = append(blocks, p.Agent)
	}
	if len(p.Instructions) > 0 {
		var sb strings.Builder
		sb.WriteString("Instructions from the user and the project. Follow them; the more specific (deeper) file wins where they disagree.")
		for _, in := range p.Instructions {
			fmt.Fprintf(&sb, "\n\n<instructions path=%q>\n%s\n</instructions>", in.Path, in.Text)
		}
		blocks = append(blocks, sb.String())
	}
	blocks = append(blocks, Environment(p.Env))
	if strings.TrimSpace(p.Extra) != "" {
		blocks = append(blocks, strings.TrimSpace(p.Extra))
	}
	return blocks
}
