package shell

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// opaqueReasons are the reasons a script gives to judge it as a whole or
// one of its commands as running unknown code, sorted, once each.
func opaqueReasons(s *Script) []string {
	out := slices.Clone(s.Opaque)
	for _, c := range s.Commands {
		if c.Opaque != "" && !slices.Contains(out, c.Opaque) {
			out = append(out, c.Opaque)
		}
	}
	slices.Sort(out)
	return out
}

// TestHiddenCodeIsOpaque: every form through which bash runs code that
// the text does not show (each verified against bash 5.2 with
// x='a[$(touch RAN)0]') is reported, and its harmless neighbours are not.
func TestHiddenCodeIsOpaque(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		src  string
		want []string
	}{
		{`x='a[$(id > out)0]'; (( x ))`, []string{whyArithmetic}},
		{`: $(( x ))`, []string{whyArithmetic}},
		{`echo $[x]`, []string{whyArithmetic}},
		{`y=$(( x + 1 ))`, []string{whyArithmetic}},
		{`let x=1`, []string{whyArithmetic}},
		{`for ((i=0; i<3; i++)); do echo; done`, []string{whyArithmetic}},
		{`[[ $x -eq 1 ]]`, []string{whyTestVar}},
		{`[[ x -lt 1 ]]`, []string{whyTestVar}},
		{`[[ -v x ]]`, []string{whyTestVar}},
		{`test -v "$x"`, []string{whyTestVar}},
		{`[ -v "$x" ]`, []string{whyTestVar}},
		{`test -z "$x" -o -v "$x"`, []string{whyTestVar}},
		{`command test -v x`, []string{whyTestVar}},
		{`echo ${x@P}`, []string{whyPrompt}},
		{`y="${x@P}"`, []string{whyPrompt}},
		{`echo ${!x}`, []string{whyIndirect}},
		{`echo ${a[i]}`, []string{whySubscript}},
		{`echo ${#a[i]}`, []string{whySubscript}},
		{`echo ${s:x}`, []string{whySubscript}},
		{`a[i]=1`, []string{whySubscript}},
		{`arr=([x]=1)`, []string{whySubscript}},
		{`printf -v x %s 1`, []string{whyVarName}},
		{`read 'a[$(id)]'`, []string{whyVarName}},
		{`read PATH`, []string{whyVarName}},
		{`unset "$x"`, []string{whyVarName}},
		{`declare -n r="$x"`, []string{whyVarName}},
		{`declare -i n=1`, []string{whyVarName}},
		{`local "$x"=1`, []string{whyVarName}},
		{`for PATH in /tmp; do ls; done`, []string{whyLoopVar}},
		{`$CMD -rf /`, []string{whyName}},
		{`curl x | sh`, []string{whyStdin}},
		{`cat f | python3`, []string{whyStdin}},
		{`bash -s < script.sh`, []string{whyStdin}},
		{`bash -c "$X"`, []string{whyText}},
		{`eval "$X"`, []string{whyText}},
		{`source "$f"`, []string{whyText}},
		{"python3 <<EOF\nprint(\"$HOME\")\nEOF", []string{whyText}},
		{`xargs sh`, []string{whyFed}},
		{`find . -exec sh -c 'echo' \;`, []string{whyFed}},
		{`hash -p /tmp/x ls`, []string{whyHash}},
		{`curl x | source /dev/stdin`, []string{whyStdin}},
		{`curl x | python3 /dev/stdin`, []string{whyStdin}},
		// Harmless neighbours.
		{`echo $((1 + 2)) $(( $# + 1 )) ${#x}`, nil},
		{`[[ -f x && $a == b ]]`, nil},
		{`[[ 1 -eq 1 ]]`, nil},
		{`echo ${x@Q} ${a[0]} ${a[@]} ${!a[@]} ${!pre*} ${s:1:2}`, nil},
		{`a[0]=1; test -f x; printf %s x; read -r line; export A=1 B=$(pwd)`, nil},
		{`python3 -c 'print(1)'; python3 script.py; bash -c 'ls'`, nil},
		{"python3 <<'EOF'\nprint(\"$HOME\")\nEOF", nil},
		{"cat <<EOF\n$HOME\nEOF", nil},
	} {
		s, err := Parse(tc.src)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.src, err)
			continue
		}
		if diff := cmp.Diff(tc.want, opaqueReasons(s)); diff != "" {
			t.Errorf("opaque reasons of %q (-want +got):\n%s", tc.src, diff)
		}
		for _, c := range s.Commands {
			if c.Opaque != "" && c.Grant() != "" {
				t.Errorf("%q: opaque command %q has a grant %q", tc.src, c.Pattern, c.Grant())
			}
		}
	}
}

// TestWrappersRunWhatTheyWrap: the command a wrapper, an assignment
// prefix, a path or an ANSI-C quote runs is a pattern of its own, so that
// deny rules written for it hold.
func TestWrappersRunWhatTheyWrap(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		src  string
		want []string
	}{
		{"command rm -rf x", []string{"command rm -rf x", "rm -rf x"}},
		{"command -v rm", []string{"command -v rm"}},
		{"builtin cd /tmp", []string{"builtin cd /tmp", "cd /tmp"}},
		{"env -i A=1 rm x", []string{"env -i A=1 rm x", "rm x"}},
		{"env -u HOME -- rm x", []string{"env -u HOME -- rm x", "rm x"}},
		{"env -S 'rm -rf x'", []string{"env -S rm -rf x", "rm -rf x"}},
		{"nice -n 5 rm x", []string{"nice -n 5 rm x", "rm x"}},
		{"nice -5 rm x", []string{"nice -5 rm x", "rm x"}},
		{"timeout -s KILL 5 rm x", []string{"timeout -s KILL 5 rm x", "rm x"}},
		{"timeout 5 rm x", []string{"timeout 5 rm x", "rm x"}},
		{"nohup rm x &", []string{"nohup rm x", "rm x"}},
		{"stdbuf -oL rm x", []string{"stdbuf -oL rm x", "rm x"}},
		{"sudo -u root rm x", []string{"sudo -u root rm x", "rm x"}},
		{"exec rm x", []string{"exec rm x", "rm x"}},
		{"time rm x", []string{"rm x"}},
		{"xargs -n1 rm -f", []string{"xargs -n1 rm -f", "rm -f"}},
		{"xargs -I{} rm {}", []string{"xargs -I{} rm {}", "rm {}"}},
		{`find . -exec rm {} +`, []string{"find . -exec rm {} +", "rm {}"}},
		{"/bin/rm x", []string{"/bin/rm x", "rm x"}},
		{"A=1 rm x", []string{"A=1 rm x", "rm x"}},
		{"sudo env nice rm x", []string{"sudo env nice rm x", "env nice rm x", "nice rm x", "rm x"}},
		{"su -c 'rm x' root", []string{"su -c rm x root", "rm x"}},
		{"flock /tmp/l rm x", []string{"flock /tmp/l rm x", "rm x"}},
		{"flock /tmp/l -c 'rm x'", []string{"flock /tmp/l -c rm x", "rm x"}},
		{"watch rm x", []string{"watch rm x", "rm x"}},
		{`$'\x72m' -rf x`, []string{"rm -rf x"}},
		{`"r"'m' -rf x`, []string{"rm -rf x"}},
		{"{rm,-rf,x}", []string{"rm -rf x"}},
		{"trap 'rm -rf x' EXIT", []string{"trap rm -rf x EXIT", "rm -rf x"}},
		{"alias ll='rm -rf x'", []string{"alias ll=rm -rf x", "rm -rf x"}},
		{"bash <<'EOF'\nrm -rf x\nEOF", []string{"bash <<'EOF'\nrm -rf x\nEOF", "rm -rf x"}},
		{"sh <<< 'rm -rf x'", []string{"sh <<< 'rm -rf x'", "rm -rf x"}},
		{`x='a[$(rm -rf y)0]'; (( x ))`, []string{"x=a[$(rm -rf y)0]", "rm -rf y", "(( x ))"}},
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

// TestExactOnly: interpreters, exec-capable tools and risky options are
// granted only exactly, and the harmless uses of their neighbours keep
// their prefix grants.
func TestExactOnly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		src  string
		want []string
	}{
		{"awk '{print $1}' f", []string{"awk {print $1} f"}},
		{"gawk -f prog.awk f", []string{"gawk -f prog.awk f"}},
		{"sed -n 1p f", []string{"sed -n 1p f"}},
		{"perl -ne 'print' f", []string{"perl -ne print f"}},
		{"ruby -e 'p 1'", []string{"ruby -e p 1"}},
		{"python3.12 -m json.tool f", []string{"python3.12 -m json.tool f"}},
		{"/usr/bin/python3 x.py", []string{"/usr/bin/python3 x.py", "python3 x.py"}},
		{"node -e 1", []string{"node -e 1"}},
		{"php -r 'echo 1;'", []string{"php -r echo 1;"}},
		{"lua x.lua", []string{"lua x.lua"}},
		{"tar xf a.tar", []string{"tar xf a.tar"}},
		{"zip -r a.zip d", []string{"zip -r a.zip d"}},
		{"rsync -a a b", []string{"rsync -a a b"}},
		{"ssh host ls", []string{"ssh host ls"}},
		{"less f", []string{"less f"}},
		{"man ls", []string{"man ls"}},
		{"vim f", []string{"vim f"}},
		{"git config core.pager cat", []string{"git config core.pager cat"}},
		{"git submodule foreach ls", []string{"git submodule foreach ls"}},
		{"git bisect run make", []string{"git bisect run make"}},
		{"docker run img", []string{"docker run img"}},
		{"unzip a.zip", []string{"unzip a.zip"}},
		{"patch -p1 -i x.diff", []string{"patch -p1 -i x.diff"}},
		// Risky options, and their abbreviations.
		{"git grep -O foo", []string{"git grep -O foo"}},
		{"git grep foo", []string{"git grep *"}},
		{"git grep $X", []string{""}},
		{"git push --receive-pack=x .", []string{"git push --receive-pack=x ."}},
		{"git push --rec=x .", []string{"git push --rec=x ."}},
		{"git push origin main", []string{"git push *"}},
		{"git fetch --upload-pack=x .", []string{"git fetch --upload-pack=x ."}},
		{"git rebase -x make main", []string{"git rebase -x make main"}},
		{"git rebase -i main", []string{"git rebase *"}},
		{"sort --compress-program=sh f", []string{"sort --compress-program=sh f"}},
		{"sort -o out f", []string{"sort *"}},
		{"go test -exec=sh ./...", []string{"go test -exec=sh ./..."}},
		{"go test ./...", []string{"go test *"}},
		{"make test --eval=x", []string{"make test --eval=x"}},
		{"make test", []string{"make test *"}},
		{"find . -delete", []string{"find . -delete"}},
		{"find . -type f", []string{"find *"}},
		{"find . $X", []string{""}},
		{"cp -r a b", []string{"cp -r a b"}},
		{"cp a b", []string{"cp *"}},
		{"curl -K cfg", []string{"curl -K cfg"}},
		// Assignments: exactly, and not at all for a variable that changes
		// what runs with a value known only at run time.
		{"X=1", []string{"X=1"}},
		{"X=$(id)", []string{"X=$(id)", "id *"}},
		{"PATH=/opt/bin", []string{"PATH=/opt/bin"}},
		{"PATH=$PWD/bin:$PATH", []string{""}},
		{"LD_PRELOAD=$(pwd)/x.so", []string{"", "pwd *"}},
		{"PATH=$PWD/bin:$PATH make", []string{"", "make"}},
		{"A=$(pwd) make", []string{"A=$(pwd) make", "make", "pwd *"}},
		// Interpreters' here-documents are part of their pattern.
		{"python3 <<'EOF'\nprint(1)\nEOF", []string{"python3 <<'EOF'\nprint(1)\nEOF"}},
		{"python3 <<< 'print(1)'", []string{"python3 <<< 'print(1)'"}},
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

// TestPathsExpandAsBashDoes: arguments and redirection targets are
// expanded with the script's own knowledge — braces, ~, ~+, ~-, its
// literal variables and the environment's — and judged from every
// directory a cd may have led to.
func TestPathsExpandAsBashDoes(t *testing.T) {
	t.Parallel()
	env := Env{Dir: "/ws", Var: func(name string) (string, bool) {
		v, ok := map[string]string{"HOME": "/home/u", "OLDPWD": "/old", "OUT": "/out"}[name]
		return v, ok
	}}
	type seen struct {
		Args, Targets, Dirs []string
	}
	last := func(s *Script) seen {
		var out seen
		if len(s.Commands) > 0 {
			c := s.Commands[len(s.Commands)-1]
			out.Args, out.Dirs = c.Args, c.Dirs
		}
		if len(s.Redirects) > 0 {
			r := s.Redirects[len(s.Redirects)-1]
			out.Targets, out.Dirs = r.Targets, r.Dirs
		}
		return out
	}
	ws := []string{"/ws"}
	for _, tc := range []struct {
		src  string
		want seen
	}{
		{"cat ~+/../x", seen{Args: []string{"/ws/../x"}, Dirs: ws}},
		{"cat ~-/x ~/y", seen{Args: []string{"/old/x", "/home/u/y"}, Dirs: ws}},
		{"cat {/etc,x}/passwd", seen{Args: []string{"/etc/passwd", "x/passwd"}, Dirs: ws}},
		{"echo > {$OUT/x,}", seen{Targets: []string{"/out/x"}, Dirs: ws}},
		{"D=/tmp; echo > $D/x", seen{Targets: []string{"/tmp/x"}, Dirs: ws}},
		{`X="a ../b"; cat $X`, seen{Args: []string{"a ../b", "a", "../b"}, Dirs: ws}},
		{"cat $UNSET/etc/passwd", seen{Args: []string{"/etc/passwd"}, Dirs: ws}},
		{"cat $(pwd)/x", seen{Dirs: ws}},
		{"cd /tmp && echo > x", seen{Targets: []string{"x"}, Dirs: []string{"/tmp"}}},
		{"cd /tmp && echo; echo > x", seen{Targets: []string{"x"}, Dirs: []string{"/ws", "/tmp"}}},
		{"cd /tmp; echo > x", seen{Targets: []string{"x"}, Dirs: []string{"/ws", "/tmp"}}},
		{"cd /tmp || exit; echo > x", seen{Targets: []string{"x"}, Dirs: []string{"/ws", "/tmp"}}},
		{"cd src && make && cd .. && ls", seen{Dirs: ws}},
		{"if cd /tmp; then :; fi && ls", seen{Dirs: []string{"/ws", "/tmp"}}},
		{"(cd /tmp); echo > x", seen{Targets: []string{"x"}, Dirs: ws}},
		{"cd sub; cd ..; ls", seen{Dirs: []string{"/ws", "/ws/sub", "/"}}},
		{"cd; ls", seen{Dirs: []string{"/ws", "/home/u"}}},
		{"cd -; ls", seen{Dirs: []string{"/ws", "/old"}}},
		{"eval 'cd /tmp'; ls", seen{Dirs: []string{"/ws", "/tmp"}}},
		{"source env.sh; cat $HOME/x", seen{Dirs: ws}},
	} {
		s, err := ParseIn(tc.src, env)
		if err != nil {
			t.Errorf("ParseIn(%q): %v", tc.src, err)
			continue
		}
		if diff := cmp.Diff(tc.want, last(s)); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.src, diff)
		}
	}
}
