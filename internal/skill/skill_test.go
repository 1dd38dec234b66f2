package skill

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/tool"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func skillFile(name, desc, body string) string {
	return "---\nname: " + name + "\ndescription: " + desc + "\nallowed-tools: Bash(*)\n---\n" + body + "\n"
}

// write makes files below dir ("->target" a symlink, "|" a FIFO).
func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case strings.HasPrefix(body, "->"):
			err = os.Symlink(body[2:], p)
		case body == "|":
			err = syscall.Mkfifo(p, 0o644)
		default:
			err = os.WriteFile(p, []byte(body), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func names(skills []Skill) string {
	var out []string
	for _, s := range skills {
		out = append(out, s.Name)
	}
	return strings.Join(out, ",")
}

func TestParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, name, desc, content, err string
	}{
		{in: skillFile("pdf", "Handle PDFs", "# PDF\nsteps"), name: "pdf", desc: "Handle PDFs", content: "# PDF\nsteps"},
		{in: "---\r\nname: crlf\r\ndescription: d\r\n---\r\nbody\r\n", name: "crlf", desc: "d", content: "body"},
		// An unquoted colon is not YAML; opencode reads it as key: value.
		{in: "---\nname: colon\ndescription: Use when: the user asks\n---\nx", name: "colon", desc: "Use when: the user asks", content: "x"},
		{in: "---\nname: \"quoted\"\ndescription: 'q'\n---\n", name: "quoted", desc: "q"},
		{in: "no front matter", err: "no front matter"},
		{in: "---\nname: x\ndescription: y\n", err: "closing"},
		{in: "---\ndescription: y\n---\nx", err: "no name"},
		{in: "---\nname: x\n---\nx", err: "no description"},
		{in: "---\nname: [a]\ndescription: y\n---\n", err: "strings"},
		{in: "---\nname: two words\ndescription: y\n---\n", err: "space"},
	} {
		s, err := Parse([]byte(tc.in))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q) = %+v, %v; want error with %q", tc.in, s, err, tc.err)
			}
			continue
		}
		if err != nil || s.Name != tc.name || s.Description != tc.desc || s.Content != tc.content {
			t.Errorf("Parse(%q) = %+v, %v", tc.in, s, err)
		}
	}
}

// TestCatalogFolders: a directory's skills come from the global folders
// and from every project folder from the repository's root down (deeper
// ones replacing shallower ones), at any depth below a folder; a project's
// skill never replaces the user's.
func TestCatalogFolders(t *testing.T) {
	t.Parallel()
	global := t.TempDir()
	write(t, global, map[string]string{"mine/SKILL.md": skillFile("mine", "the user's", "user")})
	repo := t.TempDir()
	sub := filepath.Join(repo, "pkg", "a")
	write(t, repo, map[string]string{
		".git/HEAD":                            "ref: refs/heads/main\n",
		".opencode/skill/root/SKILL.md":        skillFile("root", "from the root", "root"),
		".opencode/skills/deep/x/y/SKILL.md":   skillFile("deep", "nested", "deep"),
		".claude/skills/shared/SKILL.md":       skillFile("shared", "root's", "root"),
		".claude/skills/mine/SKILL.md":         skillFile("mine", "pwned", "pwned"),
		".agents/skills/agents/SKILL.md":       skillFile("agents", "agents", "agents"),
		"pkg/a/.claude/skills/shared/SKILL.md": skillFile("shared", "sub's", "sub"),
		"pkg/a/.agentd/skills/own/SKILL.md":    skillFile("own", "agentd's", "own"),
		".opencode/skill/notes.md":             "not a skill",
	})
	c := &Catalog{Global: []string{global}}
	got := c.For(sub)
	if n := names(got); n != "agents,deep,mine,own,root,shared" {
		t.Fatalf("skills = %s", n)
	}
	by := map[string]Skill{}
	for _, s := range got {
		by[s.Name] = s
	}
	if by["mine"].Content != "user" || by["mine"].Project {
		t.Errorf("a project skill replaced the user's: %+v", by["mine"])
	}
	if by["shared"].Content != "sub" || !by["shared"].Project {
		t.Errorf("the directory's own skill should win over the root's: %+v", by["shared"])
	}
	if want := filepath.Join(repo, ".opencode", "skills", "deep", "x", "y", "SKILL.md"); by["deep"].Location != want {
		t.Errorf("location = %s, want %s", by["deep"].Location, want)
	}
	if s, ok := c.Get(sub, "root"); !ok || s.Content != "root" {
		t.Errorf("Get(root) = %+v, %v", s, ok)
	}
	if n := names(c.For(repo)); n != "agents,deep,mine,root,shared" {
		t.Errorf("the root's skills = %s", n)
	}
}

// TestHostileFiles: a symlink out of the project is refused (its target is
// never served), a FIFO does not hang the catalog, an oversized file is
// skipped; the good skills still load.
func TestHostileFiles(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	write(t, outside, map[string]string{"secret.md": skillFile("secret", "stolen", "TOP SECRET"),
		"dir/SKILL.md": skillFile("linkeddir", "stolen", "TOP SECRET")})
	dir := t.TempDir()
	write(t, dir, map[string]string{
		".claude/skills/link/SKILL.md": "->" + filepath.Join(outside, "secret.md"),
		".claude/skills/linkdir":       "->" + filepath.Join(outside, "dir"),
		".claude/skills/fifo/SKILL.md": "|",
		".claude/skills/big/SKILL.md":  skillFile("big", "too big", strings.Repeat("x", MaxFileBytes)),
		".claude/skills/ok/SKILL.md":   skillFile("ok", "fine", "fine"),
		".claude/skills/in/SKILL.md":   "->../ok/SKILL.md",
	})
	c := &Catalog{}
	done := make(chan []Skill, 1)
	go func() { done <- c.For(dir) }()
	select {
	case got := <-done:
		for _, s := range got {
			if strings.Contains(s.Content, "TOP SECRET") {
				t.Errorf("a link out of the project was followed: %+v", s)
			}
		}
		// The link inside the project is one more name for ok's file.
		if n := names(got); n != "ok" {
			t.Errorf("skills = %s, want ok", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reading the skills hung on a FIFO")
	}
}

// TestCacheSeesChanges: the set of a directory is cached and read again
// when a SKILL.md is added, changed or removed.
func TestCacheSeesChanges(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, dir, map[string]string{".opencode/skill/a/SKILL.md": skillFile("a", "first", "one")})
	c := &Catalog{}
	if n := names(c.For(dir)); n != "a" {
		t.Fatalf("skills = %s", n)
	}
	write(t, dir, map[string]string{".opencode/skill/b/SKILL.md": skillFile("b", "second", "two")})
	if n := names(c.For(dir)); n != "a,b" {
		t.Errorf("after adding b: %s", n)
	}
	p := filepath.Join(dir, ".opencode", "skill", "a", "SKILL.md")
	if err := os.WriteFile(p, []byte(skillFile("a", "first", "changed and longer")), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, _ := c.Get(dir, "a"); s.Content != "changed and longer" {
		t.Errorf("after a change: %q", s.Content)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if n := names(c.For(dir)); n != "b" {
		t.Errorf("after removing a: %s", n)
	}
}

func TestTool(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, dir, map[string]string{
		".opencode/skill/pdf/SKILL.md":          skillFile("pdf", "Fill <PDF> forms & more", "Run scripts/fill.py."),
		".opencode/skill/pdf/scripts/fill.py":   "print(1)",
		".opencode/skill/pdf/link":              "->/etc/passwd",
		".opencode/skill/secret-ops/SKILL.md":   skillFile("secret-ops", "ops", "ops"),
		".opencode/skill/secret-ops/notes/a.md": "a",
	})
	tl := Tool{Catalog: &Catalog{}}
	var _ tool.Contextual = tl
	var _ tool.Permissioned = tl
	desc := tl.DescribeFor(dir, func(perm, pat string) bool { return perm == Permission && pat == "secret-ops" })
	if !strings.Contains(desc, "<name>pdf</name>") || !strings.Contains(desc, "Fill &lt;PDF&gt; forms &amp; more") {
		t.Errorf("description lacks pdf:\n%s", desc)
	}
	if strings.Contains(desc, "secret-ops") {
		t.Errorf("a denied skill is listed:\n%s", desc)
	}
	if d := tl.DescribeFor(t.TempDir(), nil); d != "" {
		t.Errorf("a directory without skills should leave the tool out, got %q", d)
	}
	call := tool.Call{Directory: dir, Input: json.RawMessage(`{"name":"pdf"}`)}
	needs := tl.Needs(call)
	if len(needs) != 1 || needs[0].Permission != "skill" || needs[0].Patterns[0] != "pdf" {
		t.Errorf("needs = %+v", needs)
	}
	res, err := tl.Run(context.Background(), call)
	if err != nil || res.IsError {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	base := filepath.Join(dir, ".opencode", "skill", "pdf")
	for _, want := range []string{`<skill_content name="pdf">`, "Run scripts/fill.py.", "Base directory for this skill: " + base,
		"<file>" + filepath.Join(base, "scripts", "fill.py") + "</file>"} {
		if !strings.Contains(res.Output, want) {
			t.Errorf("output lacks %q:\n%s", want, res.Output)
		}
	}
	if strings.Contains(res.Output, "link") || strings.Contains(res.Output, "SKILL.md</file>") {
		t.Errorf("output names a link or the SKILL.md:\n%s", res.Output)
	}
	res, _ = tl.Run(context.Background(), tool.Call{Directory: dir, Input: json.RawMessage(`{"name":"nope"}`)})
	if !res.IsError || !strings.Contains(res.Output, "pdf, secret-ops") {
		t.Errorf("unknown skill: %+v", res)
	}
}

// TestBounds: a directory's skills are bounded in number and in bytes.
func TestBounds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files := map[string]string{}
	big := strings.Repeat("x", 200<<10)
	for i := range 30 {
		name := fmt.Sprintf("s%02d", i)
		files[".claude/skills/"+name+"/SKILL.md"] = skillFile(name, "d", big)
	}
	write(t, dir, files)
	got := (&Catalog{}).For(dir)
	size := 0
	for _, s := range got {
		size += len(s.Content)
	}
	if len(got) == 0 || len(got) == 30 || size > MaxBytes || got[0].Name != "s00" {
		t.Errorf("%d skills of %d bytes kept (first %s)", len(got), size, got[0].Name)
	}
}

// BenchmarkFor measures what a run's setup pays to list a directory's
// skills when none changed: the walk that makes the fingerprint.
func BenchmarkFor(b *testing.B) {
	repo := b.TempDir()
	os.MkdirAll(filepath.Join(repo, ".git"), 0o755)
	sub := filepath.Join(repo, "a", "b")
	for i := range 5 {
		p := filepath.Join(repo, ".claude", "skills", fmt.Sprintf("s%d", i), "SKILL.md")
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(skillFile(fmt.Sprintf("s%d", i), "d", "body")), 0o644)
	}
	os.MkdirAll(sub, 0o755)
	c := &Catalog{}
	c.For(sub)
	b.ReportAllocs()
	for b.Loop() {
		if len(c.For(sub)) != 5 {
			b.Fatal("skills lost")
		}
	}
}
