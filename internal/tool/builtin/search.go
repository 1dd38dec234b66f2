package builtin

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/tool"
)

const (
	globMax = 100
	grepMax = 200
	listMax = 200
	// globCollect and grepCollect stop a search: past them the result
	// says the search stopped, instead of holding every match of a huge
	// tree in memory.
	globCollect = 1000
	grepCollect = 1000
	// grepLine is the longest part of a matching line grep shows, and
	// grepScanLine the longest part of any line it searches.
	grepLine     = 500
	grepScanLine = 64 << 10
	// grepTimeout bounds a search; what was found by then is shown.
	grepTimeout = 60 * time.Second
)

var skipDirs = map[string]bool{".git": true, "node_modules": true, ".agentd": true}

// walkFiles calls fn for every regular file under root (not following
// symlinks, and never out of the workspace), skipping .git and
// node_modules and unreadable entries, until fn returns false or ctx
// ends.
func walkFiles(ctx context.Context, call tool.Call, root string, fn func(pl place, p string, d fs.DirEntry) bool) error {
	pl, err := locate(call, root)
	if err != nil {
		return nil
	}
	defer pl.close()
	return pl.walk(ctx.Err, func(p string, d fs.DirEntry) error {
		if !d.IsDir() && !fn(pl, p, d) {
			return fs.SkipAll
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

// ReadOnly says glob changes no file.
func (Glob) ReadOnly() bool { return true }

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
	stopped := false
	err = walkFiles(ctx, call, root, func(_ place, p string, d fs.DirEntry) bool {
		if re.MatchString(filepath.ToSlash(rel(root, p))) {
			out = append(out, rel(call.Directory, p))
		}
		stopped = len(out) >= globCollect
		return !stopped
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
	if stopped {
		more += fmt.Sprintf("\n(search stopped after %d matches; narrow the pattern or the path)", globCollect)
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

// ReadOnly says grep changes no file.
func (Grep) ReadOnly() bool { return true }

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
	if st, err := os.Stat(root); err != nil || !st.IsDir() && !st.Mode().IsRegular() {
		return tool.Errorf(fmt.Sprintf("%s is not a directory or a regular file", orDot(in.Path))), nil
	}
	sctx, cancel := context.WithTimeout(ctx, grepTimeout)
	defer cancel()
	var found grepResult
	if rg, lerr := exec.LookPath("rg"); lerr == nil && !g.NoRipgrep {
		err = ripgrep(sctx, call, rg, in.Pattern, in.Include, root, &found)
	} else {
		err = walkGrep(sctx, call, re, include, root, &found)
	}
	if ctx.Err() != nil {
		return tool.Result{}, ctx.Err()
	}
	if sctx.Err() != nil {
		found.timedOut, err = true, nil
	}
	if err != nil {
		return tool.Result{}, err
	}
	ms := found.ms
	sort.Slice(ms, func(i, j int) bool {
		if ms[i].path != ms[j].path {
			return ms[i].path < ms[j].path
		}
		return ms[i].line < ms[j].line
	})
	if len(ms) == 0 && found.note() == "" {
		return tool.Result{Output: "no matches", Title: in.Pattern}, nil
	}
	var sb strings.Builder
	for i, m := range ms {
		if i == grepMax {
			fmt.Fprintf(&sb, "(%d more matches not shown)\n", len(ms)-grepMax)
			break
		}
		fmt.Fprintf(&sb, "%s:%d: %s\n", rel(call.Directory, m.path), m.line, m.text)
	}
	sb.WriteString(found.note())
	return tool.Result{Output: sb.String(), Title: in.Pattern, Metadata: map[string]any{"matches": len(ms), "truncated": found.stopped || found.timedOut}}, nil
}

// grepResult is what a search found, and why it stopped early if it did.
type grepResult struct {
	ms        []match
	stopped   bool // grepCollect matches found
	timedOut  bool
	longLines int // lines cut at grepLine characters
}

// add records a match; false once the search has enough.
func (g *grepResult) add(m match) bool {
	if len(m.text) > grepLine {
		m.text = strings.ToValidUTF8(m.text[:grepLine], "") + "…"
		g.longLines++
	}
	g.ms = append(g.ms, m)
	g.stopped = len(g.ms) >= grepCollect
	return !g.stopped
}

// note says how the search was cut short, if it was.
func (g *grepResult) note() string {
	var sb strings.Builder
	if g.stopped {
		fmt.Fprintf(&sb, "(search stopped after %d matches; narrow the pattern, the path or include)\n", grepCollect)
	}
	if g.timedOut {
		fmt.Fprintf(&sb, "(search stopped after %v; what it found by then is above)\n", grepTimeout)
	}
	if g.longLines > 0 {
		fmt.Fprintf(&sb, "(%d matching lines cut at %d characters)\n", g.longLines, grepLine)
	}
	return sb.String()
}

// walkGrep searches line by line, holding one line (at most
// grepScanLine bytes of it) at a time: no file is too large to search.
func walkGrep(ctx context.Context, call tool.Call, re, include *regexp.Regexp, root string, found *grepResult) error {
	buf := make([]byte, 0, grepScanLine)
	return walkFiles(ctx, call, root, func(pl place, p string, d fs.DirEntry) bool {
		if include != nil && !include.MatchString(d.Name()) {
			return true
		}
		f, err := pl.openIn(p)
		if err != nil {
			return true
		}
		defer f.Close()
		br := bufio.NewReaderSize(f, 64<<10)
		if head, _ := br.Peek(8192); isBinary(head) {
			return true
		}
		for n := 1; ctx.Err() == nil; n++ {
			line, err := readLine(br, buf, grepScanLine, true)
			if line != nil && re.Match(line) && !found.add(match{path: p, line: n, text: string(line)}) {
				return false
			}
			if err != nil {
				return true
			}
		}
		return false
	})
}

// ripgrep streams rg's matches, stopping it once the search has enough;
// rg shortens long lines itself (--max-columns).
func ripgrep(ctx context.Context, call tool.Call, rg, pattern, include, root string, found *grepResult) error {
	args := []string{"--no-heading", "--line-number", "--with-filename", "--color", "never", "--no-messages",
		"--max-columns", strconv.Itoa(grepLine), "--max-columns-preview", "-g", "!.git", "-g", "!node_modules"}
	if include != "" {
		args = append(args, "--glob", include)
	}
	args = append(args, "-e", pattern, root)
	cmd := exec.CommandContext(ctx, rg, args...)
	cmd.Env = call.Env.Environ()
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("ripgrep: %w", err)
	}
	release, err := call.Sandbox.Wrap(cmd, confinement(call, true))
	if err != nil {
		return err
	}
	defer release()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("ripgrep: %w", err)
	}
	br := bufio.NewReaderSize(out, 64<<10)
	buf := make([]byte, 0, grepScanLine)
	for {
		line, rerr := readLine(br, buf, grepScanLine, true)
		if p, rest, ok := strings.Cut(string(line), ":"); ok {
			num, text, ok := strings.Cut(rest, ":")
			if n, err := strconv.Atoi(num); ok && err == nil && !found.add(match{path: p, line: n, text: text}) {
				break
			}
		}
		if rerr != nil {
			break
		}
	}
	// Stopped early or not, rg is done with: its exit status says only
	// whether it found anything (1: nothing).
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	return nil
}

// List shows a directory tree.
type List struct{}

// Name implements tool.Tool.
func (List) Name() string { return "list" }

// ReadOnly says list changes no file.
func (List) ReadOnly() bool { return true }

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
