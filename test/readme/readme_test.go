// Package readme_test holds the README to what it shows: it must render
// as written (every fence closed, no section swallowed by a code block),
// its configuration examples must pass agentd's strict configuration
// check, and its curl walk-through is run against a real agentd with its
// printed answers compared.
package readme_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/text"

	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/testbin"
	"github.com/agentd/agentd/internal/testenv"
)

// block is a fenced code block of the README.
type block struct {
	lang       string
	code       string
	start, end int // lines of the content, 1-based
	closed     bool
}

// pages are the README and the guides and reference under docs/, as
// paths from the repository's root.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md"}
	for _, d := range docs {
		out = append(out, "docs/"+filepath.Base(d))
	}
	if len(out) < 8 {
		t.Fatalf("pages: %v", out)
	}
	return out
}

// parse renders the README's structure with a CommonMark parser.
func parse(t *testing.T) ([]byte, []block, map[int]bool) {
	t.Helper()
	return parsePage(t, "README.md")
}

// parsePage renders one page's structure with a CommonMark parser.
func parsePage(t *testing.T, page string) ([]byte, []block, map[int]bool) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("../..", page))
	if err != nil {
		t.Fatal(err)
	}
	lineOf := func(off int) int { return bytes.Count(src[:off], []byte("\n")) + 1 }
	lines := bytes.Split(src, []byte("\n"))
	doc := goldmark.New().Parser().Parse(text.NewReader(src))
	var blocks []block
	inCode := map[int]bool{}
	ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		fb, ok := n.(*ast.FencedCodeBlock)
		if !entering || !ok {
			return ast.WalkContinue, nil
		}
		b := block{lang: string(fb.Language(src))}
		var code strings.Builder
		segs := fb.Lines()
		for i := 0; i < segs.Len(); i++ {
			s := segs.At(i)
			code.Write(s.Value(src))
			l := lineOf(s.Start)
			inCode[l] = true
			if b.start == 0 {
				b.start = l
			}
			b.end = l
		}
		b.code = code.String()
		if segs.Len() > 0 {
			// The line after the content must close the fence.
			next := b.end
			b.closed = next < len(lines) && bytes.HasPrefix(bytes.TrimSpace(lines[next]), []byte("```"))
		} else {
			b.closed = true
		}
		blocks = append(blocks, b)
		return ast.WalkContinue, nil
	})
	return src, blocks, inCode
}

// TestREADMERenders: every fence closes, and no section heading ends up
// inside a code block (what an unclosed fence does to the rest of the
// page).
func TestREADMERenders(t *testing.T) {
	t.Parallel()
	total := 0
	for _, page := range pages(t) {
		src, blocks, inCode := parsePage(t, page)
		total += len(blocks)
		for _, b := range blocks {
			if !b.closed {
				t.Errorf("%s: the code block starting at line %d is not closed", page, b.start-1)
			}
		}
		heading := regexp.MustCompile(`^#{2,6} \S`)
		for i, line := range strings.Split(string(src), "\n") {
			if heading.MatchString(line) && inCode[i+1] {
				t.Errorf("%s: line %d %q renders as code: a fence above it is not closed", page, i+1, line)
			}
		}
	}
	if total < 20 {
		t.Fatalf("%d code blocks found", total)
	}
}

// TestREADMEConfigExamples: every JSON example is a configuration that
// agentd's strict check accepts (no unknown key, no typo).
func TestREADMEConfigExamples(t *testing.T) {
	t.Parallel()
	n := 0
	for _, page := range pages(t) {
		if page == "docs/ARCHITECTURE.md" {
			continue // its JSON is the design's, not configurations
		}
		_, blocks, _ := parsePage(t, page)
		for _, b := range blocks {
			if b.lang != "json" {
				continue
			}
			n++
			anyVar := func(string) (string, bool) { return "x", true }
			if _, _, err := config.ParseFile(fmt.Sprintf("%s:%d", page, b.start), []byte(b.code), anyVar); err != nil {
				t.Errorf("%s: the example at line %d: %v", page, b.start, err)
			}
		}
	}
	if n < 5 {
		t.Errorf("%d JSON examples found", n)
	}
}

// step is one command of the walk-through with the answer the README
// prints under it (empty: none shown).
type step struct {
	line    int
	command string
	want    string
}

// walkthrough returns the commands of the curl walk-through.
func walkthrough(t *testing.T) []step {
	t.Helper()
	src, blocks, _ := parse(t)
	at := bytes.Index(src, []byte("## A walk through the API with curl"))
	if at < 0 {
		t.Fatal("no curl walk-through in the README")
	}
	line := bytes.Count(src[:at], []byte("\n")) + 1
	var code block
	for _, b := range blocks {
		if b.start > line {
			code = b
			break
		}
	}
	var steps []step
	lines := strings.Split(strings.TrimRight(code.code, "\n"), "\n")
	answer := regexp.MustCompile(`^# ([{\["]|true$|false$)`)
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.TrimSpace(l) == "":
		case strings.HasPrefix(l, "#"):
			if answer.MatchString(l) && len(steps) > 0 && steps[len(steps)-1].want == "" {
				steps[len(steps)-1].want = strings.TrimPrefix(l, "# ")
			}
		default:
			s := step{line: code.start + i, command: l}
			for strings.HasSuffix(s.command, "\\") && i+1 < len(lines) {
				i++
				s.command += "\n" + lines[i]
			}
			steps = append(steps, s)
		}
	}
	return steps
}

// TestREADMEWalkthrough runs the README's curl walk-through, as written,
// against a real agentd and compares each answer the README prints ("…"
// stands for what differs between runs).
func TestREADMEWalkthrough(t *testing.T) {
	t.Parallel()
	testenv.SkipShort(t)
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("AGENTD_README_REQUIRED") != "" {
				t.Fatalf("%s is not installed", tool)
			}
			testenv.Skip(t, testenv.Tools, tool+" is not installed")
		}
	}
	steps := walkthrough(t)
	if len(steps) < 10 {
		t.Fatalf("%d commands in the walk-through", len(steps))
	}
	port := serve(t)

	// One script: every command as written, the server's port put in, a
	// marker before each so the answers can be told apart; the event
	// stream, which follows forever, is cut after two seconds.
	var script strings.Builder
	script.WriteString("curl() { command curl --max-time 40 \"$@\"; }\n")
	for i, s := range steps {
		cmd := strings.ReplaceAll(s.command, "localhost:4096", "localhost:"+port)
		cmd = strings.ReplaceAll(cmd, "curl -sN ", "curl -sN --max-time 2 ")
		fmt.Fprintf(&script, "echo '@@step %d'\n%s\necho\n", i, cmd)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("the walk-through did not finish: %v\n%s", err, out)
	}
	answers := map[int]string{}
	for _, part := range strings.Split(string(out), "@@step ")[1:] {
		var i int
		fmt.Sscanf(part, "%d", &i)
		_, rest, _ := strings.Cut(part, "\n")
		answers[i] = strings.TrimSpace(rest)
	}
	for i, s := range steps {
		got := answers[i]
		if s.want == "" {
			continue
		}
		if !matches(s.want, got) {
			t.Errorf("README line %d: %s\n  the README shows %s\n  agentd answered  %s", s.line, s.command, s.want, got)
		}
	}
	// What the README implies without printing it.
	last := answers[len(steps)-1]
	if !strings.Contains(last, `"type":"session.created"`) || !strings.Contains(last, "id: ") {
		t.Errorf("the replayed event log holds no session.created:\n%.500s", last)
	}
}

// matches compares an answer with the README's, "…" matching anything.
func matches(want, got string) bool {
	parts := strings.Split(want, "…")
	for i := range parts {
		parts[i] = regexp.QuoteMeta(parts[i])
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*") + "$").MatchString(got)
}

// serve starts agentd as the README does (the default port aside) and
// returns its port.
func serve(t *testing.T) string {
	t.Helper()
	bin := testbin.Agentd(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	home := t.TempDir()
	cmd := exec.Command(bin, "serve", "--port", port)
	cmd.Dir = home
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, "config"),
		"XDG_DATA_HOME="+filepath.Join(home, "data"), "OPENAI_API_KEY=", "ANTHROPIC_API_KEY=", "AGENTD_DATABASE_URL=")
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
		if t.Failed() {
			t.Logf("agentd's log:\n%s", logs.String())
		}
	})
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if r, err := http.Get("http://127.0.0.1:" + port + "/global/health"); err == nil {
			r.Body.Close()
			return port
		}
	}
	t.Fatalf("agentd did not start:\n%s", logs.String())
	return ""
}
