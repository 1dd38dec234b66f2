package builtin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/agentd/agentd/internal/tool"
)

const (
	globMax = 100
	grepMax = 200
	listMax = 200
)

var skipDirs = map[string]bool{".git": true, "node_modules": true}

// walkFiles calls fn for every regular file under root (not following
// symlinks, and never out of the workspace), skipping .git and
// node_modules and unreadable entries, until ctx ends.
func walkFiles(ctx context.Context, call tool.Call, root string, fn func(pl place, p string, d fs.DirEntry)) error {
	pl, err := locate(call, root)
	if err != nil {
		return nil
	}
	defer pl.close()
	return pl.walk(ctx.Err, func(p string, d fs.DirEntry) error {
		if !d.IsDir() {
			fn(pl, p, d)
		}
		return nil
	})
}

// globRegexp compiles a glob ("**" for any directories, "*" and "?" within
// one name, {a,b} alternatives) into an anchored regular expression.
func globRegexp(pattern string) (*regexp.Regexp, error) {
	var sb strings.Builder
	sb.WriteString("^")
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		switch {
		case c == '*' && i+1 < len(pattern) && pattern[i+1] == '*':
			i++
			if i+1 < len(pattern) && pattern[i+1] == '/' {
				i++
				sb.WriteString("(?:.*/)?")
			} else {
				sb.WriteString(".*")
			}
		case c == '*':
			sb.WriteString("[^/]*")
		case c == '?':
			sb.WriteString("[^/]")
		case c == '{':
			end := strings.IndexByte(pattern[i:], '}')
			if end < 0 {
				sb.WriteString(regexp.QuoteMeta("{"))
				continue
			}
			alts := strings.Split(pattern[i+1:i+end], ",")
			for k := range alts {
				alts[k] = regexp.QuoteMeta(alts[k])
			}
			sb.WriteString("(?:" + strings.Join(alts, "|") + ")")
			i += end
		default:
			sb.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	sb.WriteString("$")
	return regexp.Compile(sb.String())
}

// Glob finds files by name pattern.
type Glob struct{}

// Name implements tool.Tool.
func (Glob) Name() string { return "glob" }

// Description implements tool.Tool.
func (Glob) Description() string { return describe("glob") }

// Schema implements tool.Tool.
func (Glob) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"pattern":{"type":"string"},"path":{"type":"string"}},"required":["pattern"]}`)
}

// Run implements tool.Tool.
func (Glob) Run(ctx context.Context, call tool.Call) (tool.Result, error) {
	var in struct {
		Pattern string `json:"pattern"`
		Path    string `json:"path"`
	}
	if r := decode(call.Input, &in); r != nil {
		return *r, nil
	}
	if in.Pattern == "" {
		return tool.Errorf("pattern is required"), nil
	}
	root, r := path(call, orDot(in.Path), "path", true)
	if r != nil {
		return *r, nil
	}
	re, err := globRegexp(in.Pattern)
	if err != nil {
		return tool.Errorf("bad pattern: " + err.Error()), nil
	}
	var out []string
	err = walkFiles(ctx, call, root, func(_ place, p string, d fs.DirEntry) {
		if re.MatchString(filepath.ToSlash(rel(root, p))) {
			out = append(out, rel(call.Directory, p))
		}
	})
	if err != nil {
		return tool.Result{}, err
	}
	sort.Strings(out)
	more := ""
	if len(out) > globMax {
		more = fmt.Sprintf("\n(%d more not shown)", len(out)-globMax)
		out = out[:globMax]
	}
	if len(out) == 0 {
		return tool.Result{Output: "no files match " + in.Pattern, Title: in.Pattern}, nil
	}
	return tool.Result{Output: strings.Join(out, "\n") + more, Title: in.Pattern, Metadata: map[string]any{"count": len(out)}}, nil
}

func orDot(s string) string {
	if s == "" {
		return "."
	}
	return s
}

// Grep searches file contents.
type Grep struct {
	// NoRipgrep forces the pure-Go search (tests compare both).
	NoRipgrep bool
}

// Name implements tool.Tool.
func (Grep) Name() string { return "grep" }

// Description implements tool.Tool.
func (Grep) Description() string { return describe("grep") }

// Schema implements tool.Tool.
func (Grep) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"pattern":{"type":"string"},"path":{"type":"string"},"include":{"type":"string"}},"required":["pattern"]}`)
}

type match struct {
	path string
	line int
	text string
}

// Run implements tool.Tool.
func (g Grep) Run(ctx context.Context, call tool.Call) (tool.Result, error) {
	var in struct {
		Pattern string `json:"pattern"`
		Path    string `json:"path"`
		Include string `json:"include"`
	}
	if r := decode(call.Input, &in); r != nil {
		return *r, nil
	}
	re, err := regexp.Compile(in.Pattern)
	if err != nil || in.Pattern == "" {
		return tool.Errorf(fmt.Sprintf("bad pattern %q: %v", in.Pattern, err)), nil
	}
	root, r := path(call, orDot(in.Path), "path", true)
	if r != nil {
		return *r, nil
	}
	var include *regexp.Regexp
	if in.Include != "" {
		if include, err = globRegexp(in.Include); err != nil {
			return tool.Errorf("bad include: " + err.Error()), nil
		}
	}
	var ms []match
	if rg, lerr := exec.LookPath("rg"); lerr == nil && !g.NoRipgrep {
		ms, err = ripgrep(ctx, rg, in.Pattern, in.Include, root)
	} else {
		ms, err = walkGrep(ctx, call, re, include, root)
	}
	if err != nil {
		return tool.Result{}, err
	}
	sort.Slice(ms, func(i, j int) bool {
		if ms[i].path != ms[j].path {
			return ms[i].path < ms[j].path
		}
		return ms[i].line < ms[j].line
	})
	if len(ms) == 0 {
		return tool.Result{Output: "no matches", Title: in.Pattern}, nil
	}
	var sb strings.Builder
	for i, m := range ms {
		if i == grepMax {
			fmt.Fprintf(&sb, "(%d more matches not shown)\n", len(ms)-grepMax)
			break
		}
		text := m.text
		if len(text) > 500 {
			text = text[:500] + "…"
		}
		fmt.Fprintf(&sb, "%s:%d: %s\n", rel(call.Directory, m.path), m.line, text)
	}
	return tool.Result{Output: sb.String(), Title: in.Pattern, Metadata: map[string]any{"matches": len(ms)}}, nil
}

func walkGrep(ctx context.Context, call tool.Call, re, include *regexp.Regexp, root string) ([]match, error) {
	var ms []match
	err := walkFiles(ctx, call, root, func(pl place, p string, d fs.DirEntry) {
		if include != nil && !include.MatchString(d.Name()) {
			return
		}
		f, err := pl.openIn(p)
		if err != nil {
			return
		}
		data, err := io.ReadAll(io.LimitReader(f, maxFileBytes))
		f.Close()
		if err != nil || isBinary(data) {
			return
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 64*1024), 4<<20)
		for n := 1; sc.Scan(); n++ {
			if re.Match(sc.Bytes()) {
				ms = append(ms, match{path: p, line: n, text: sc.Text()})
			}
		}
	})
	return ms, err
}

func ripgrep(ctx context.Context, rg, pattern, include, root string) ([]match, error) {
	args := []string{"--no-heading", "--line-number", "--with-filename", "--color", "never", "--no-messages", "-g", "!.git", "-g", "!node_modules"}
	if include != "" {
		args = append(args, "--glob", include)
	}
	args = append(args, "-e", pattern, root)
	out, err := exec.CommandContext(ctx, rg, args...).Output()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ripgrep: %w", err)
	}
	var ms []match
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		p, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		num, text, ok := strings.Cut(rest, ":")
		n, err := strconv.Atoi(num)
		if !ok || err != nil {
			continue
		}
		ms = append(ms, match{path: p, line: n, text: text})
	}
	return ms, nil
}

// List shows a directory tree.
type List struct{}

// Name implements tool.Tool.
func (List) Name() string { return "list" }

// Description implements tool.Tool.
func (List) Description() string { return describe("list") }

// Schema implements tool.Tool.
func (List) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"ignore":{"type":"array","items":{"type":"string"}}}}`)
}

// Run implements tool.Tool.
func (List) Run(ctx context.Context, call tool.Call) (tool.Result, error) {
	var in struct {
		Path   string   `json:"path"`
		Ignore []string `json:"ignore"`
	}
	if r := decode(call.Input, &in); r != nil {
		return *r, nil
	}
	root, r := path(call, orDot(in.Path), "path", true)
	if r != nil {
		return *r, nil
	}
	pl, err := locate(call, root)
	if err != nil {
		return tool.Errorf(fmt.Sprintf("cannot list %s: %v", orDot(in.Path), errText(err))), nil
	}
	defer pl.close()
	if st, err := pl.stat(); err != nil || !st.IsDir() {
		return tool.Errorf(fmt.Sprintf("%s is not a directory", orDot(in.Path))), nil
	}
	var ignores []*regexp.Regexp
	for _, g := range in.Ignore {
		re, err := globRegexp(g)
		if err != nil {
			return tool.Errorf("bad ignore pattern: " + err.Error()), nil
		}
		ignores = append(ignores, re)
	}
	var sb strings.Builder
	sb.WriteString(root + "/\n")
	count := 0
	err = pl.walk(ctx.Err, func(p string, d fs.DirEntry) error {
		if p == root {
			return nil
		}
		for _, re := range ignores {
			if re.MatchString(d.Name()) {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		count++
		if count > listMax {
			return fs.SkipAll
		}
		depth := strings.Count(rel(root, p), string(filepath.Separator))
		name := d.Name()
		if d.IsDir() {
			name += "/"
		}
		sb.WriteString(strings.Repeat("  ", depth+1) + name + "\n")
		return nil
	})
	if err != nil {
		return tool.Result{}, err
	}
	if count > listMax {
		fmt.Fprintf(&sb, "(listing cut at %d entries)\n", listMax)
	}
	return tool.Result{Output: sb.String(), Title: rel(call.Directory, root), Metadata: map[string]any{"count": min(count, listMax)}}, nil
}
