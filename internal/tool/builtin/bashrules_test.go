package builtin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/permission"
	"github.com/agentd/agentd/internal/tool"
)

// decideWith is what the engine decides for a call's needs under the
// operator's rules; shell is the user's /shell command, which never asks
// (only the operator's deny rules apply).
func decideWith(operator []core.Rule, needs []tool.Need, granted []core.Rule, shell bool) string {
	out := core.ActionAllow
	for _, n := range needs {
		if shell {
			n.Ask = false
		}
		switch a := n.Decide(operator, nil, granted); {
		case a == core.ActionDeny:
			return core.ActionDeny
		case a == core.ActionAsk && !shell:
			out = core.ActionAsk
		}
	}
	return out
}

// TestBashHiddenCodeAsks: scripts whose code bash runs from data — with
// no simple command at all, or behind a command an "always" covered —
// ask under the default rules; the forms ran with no ask.
func TestBashHiddenCodeAsks(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	for _, cmd := range []string{
		`x='a[$(id > out)0]'; (( x ))`,
		`(( x ))`,
		`y=$(( x ))`,
		`[[ $x -eq 1 ]]`,
		`y=${x@P}`,
		`y=${!x}`,
		`let x`,
		`a[i]=1`,
		`x=1`,
		`PATH=$PWD/bin:$PATH`,
	} {
		if got := decide(bashNeeds(t, ws, cmd), nil); got != core.ActionAsk {
			t.Errorf("%q with default rules: %s, want ask", cmd, got)
		}
	}
	// $(cat /etc/hostname > f) reads outside the workspace.
	var ext []string
	for _, n := range bashNeeds(t, ws, `$(cat /etc/hostname > f)`) {
		if n.Permission == "external_directory" {
			ext = n.Patterns
		}
	}
	if !slices.Contains(ext, "/etc") {
		t.Errorf("$(cat /etc/hostname > f) asks external_directory for %v, want /etc", ext)
	}
}

// TestBashAlwaysDoesNotCoverHiddenCode: after "always" on one command,
// the dynamic forms, here-documents, interpreters and assignments of the
// issue still ask; what was granted still runs.
func TestBashAlwaysDoesNotCoverHiddenCode(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	for _, tc := range []struct {
		granted, later, want string
	}{
		{"echo hi", "echo $(( x ))", core.ActionAsk},
		{"echo hi", "x='a[$(id)0]'; echo $(( x ))", core.ActionAsk},
		{"echo hi", "echo ${x@P}", core.ActionAsk},
		{"echo hi", "echo ${!x}", core.ActionAsk},
		{"echo hi", "echo ${a[x]}", core.ActionAsk},
		{"printf x", "printf -v x %s y", core.ActionAsk},
		{"test -f x", "test -v x", core.ActionAsk},
		{"test -f x", "test -f x -o -v y", core.ActionAsk},
		{"python3 <<'EOF'\nprint(1)\nEOF", "python3 <<'EOF'\nimport os; os.system('id')\nEOF", core.ActionAsk},
		{"bash <<'EOF'\necho hi\nEOF", "bash <<'EOF'\nid\nEOF", core.ActionAsk},
		{"python3 <<< 'print(1)'", "python3 <<< 'import os'", core.ActionAsk},
		{"curl x; sh -c 'echo'", "curl x | sh", core.ActionAsk},
		{"echo x | python3 -c 'print(1)'", "echo 'import os' | python3", core.ActionAsk},
		{"awk '{print}' f", "awk 'BEGIN{system(\"id\")}'", core.ActionAsk},
		{"sed -n 1p f", "sed -n 1e f", core.ActionAsk},
		{"tar tf a.tar", "tar xf a.tar --to-command=sh", core.ActionAsk},
		{"git grep foo", "git grep -O'sh -c id' foo", core.ActionAsk},
		{"git push origin main", "git push --receive-pack='sh -c id' . main", core.ActionAsk},
		{"find . -name x", "find . -name x -delete", core.ActionAsk},
		{"find . -name x", "find . $X", core.ActionAsk},
		{"make test", "make test --eval='$(shell id)'", core.ActionAsk},
		{"ls", "PATH=/tmp ls", core.ActionAsk},
		{"ls", "PATH=$PWD/bin:$PATH; ls", core.ActionAsk},
		{"ls", "IFS=/; ls", core.ActionAsk},
		{"ls", "export PATH=/tmp; ls", core.ActionAsk},
		{"nice ls", "nice rm -rf x", core.ActionAsk},
		// What was granted, and what it was meant to cover, runs.
		{"python3 <<'EOF'\nprint(1)\nEOF", "python3 <<'EOF'\nprint(1)\nEOF", core.ActionAllow},
		{"git grep foo", "git grep -n bar", core.ActionAllow},
		{"find . -name x", "find . -type f", core.ActionAllow},
		{"make test", "make test V=1", core.ActionAllow},
		{"out=$(git status); echo $out", "out=$(git status); echo $out", core.ActionAllow},
		{"nice make", "nice make", core.ActionAllow},
		{"echo $((1+2))", "echo $((3*4))", core.ActionAllow},
	} {
		granted := grant(bashNeeds(t, ws, tc.granted))
		if got := decide(bashNeeds(t, ws, tc.later), granted); got != tc.want {
			t.Errorf("after always on %q, %q: %s, want %s (grants %v)", tc.granted, tc.later, got, tc.want, granted)
		}
	}
}

// TestDenyRulesSeeWhatWrappersRun: an operator's deny on "rm *" holds for
// the model's calls and the user's /shell alike, whatever wraps the rm,
// and for commands whose text cannot show what they run.
func TestDenyRulesSeeWhatWrappersRun(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	operator := append(permission.Defaults(),
		core.Rule{Permission: "bash", Pattern: "*", Action: core.ActionAllow},
		core.Rule{Permission: "bash", Pattern: "rm *", Action: core.ActionDeny})
	for _, cmd := range []string{
		"rm -rf x", "command rm -rf x", "builtin command rm x", "env rm x", "env -i A=1 rm x", "nice rm x",
		"nice -n 5 rm x", "timeout 5 rm x", "nohup rm x", "stdbuf -oL rm x", "sudo rm x", "exec rm x",
		"time rm x", "xargs rm", "ls | xargs -n1 rm -f", "find . -exec rm {} +", "/bin/rm x", "A=1 rm x",
		`$'\x72m' x`, `"r"m x`, "{rm,x}", "bash -c 'rm x'", "sh <<'EOF'\nrm x\nEOF", "echo rm x | sh",
		"$CMD x", `x='a[$(rm y)0]'; (( x ))`, "trap 'rm x' EXIT", "eval \"$X\"", "watch rm x",
		"su -c 'rm x' root", "env -S 'rm x'",
		// Past the budget of expansions, a brace word is only known at
		// run time, never taken as written.
		strings.Repeat("echo {a,b}{c,d}{e,f}{g,h}{i,j}{k,l}; ", 200) + "{rm,x}",
	} {
		needs := bashNeeds(t, ws, cmd)
		for _, shell := range []bool{false, true} {
			if got := decideWith(operator, needs, nil, shell); got != core.ActionDeny {
				t.Errorf("%q (shell %v): %s, want deny", cmd, shell, got)
			}
		}
	}
	for _, cmd := range []string{"ls", "command -v rm", "echo rm", "nice make", "echo $((x))"} {
		if got := decideWith(permission.Defaults(), bashNeeds(t, ws, cmd), nil, true); got != core.ActionAllow {
			t.Errorf("%q in /shell without deny rules: %s, want allow", cmd, got)
		}
	}
	if got := decideWith(operator, bashNeeds(t, ws, "ls"), nil, false); got != core.ActionAllow {
		t.Errorf("ls under the operator's rules: %s", got)
	}
}

// TestBashPathsResolvedAsBashDoes: each way of naming a file outside the
// workspace that the issue found asks external_directory.
func TestBashPathsResolvedAsBashDoes(t *testing.T) {
	t.Parallel()
	ws, out := t.TempDir(), t.TempDir()
	if err := os.Symlink(out, filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	home, _ := os.UserHomeDir()
	for _, tc := range []struct{ cmd, want string }{
		{"cat ~+/../x", filepath.Dir(ws)},
		{"echo > {$HOME/x,}", home},
		{"cat {" + out + ",x}/f", out},
		{"dd of=" + out + "/x if=y", out},
		{"sort -o" + out + "/x y", out},
		{"cd sub && echo > ../../x", filepath.Dir(ws)},
		{"cd sub; cat ../../x", filepath.Dir(ws)},
		{"cat link/f", out},
		{"echo x > link/f", out},
		{"D=" + out + "; echo > $D/x", out},
		{"make DESTDIR=" + out + " install", out},
		{"git --git-dir=" + out + " status", out},
	} {
		var got []string
		for _, n := range bashNeeds(t, ws, tc.cmd) {
			if n.Permission == "external_directory" {
				got = n.Patterns
			}
		}
		if !slices.Contains(got, tc.want) {
			t.Errorf("%q asks external_directory for %v, want %s", tc.cmd, got, tc.want)
		}
	}
}

// TestProtectedWrites: writes to .git/ and .agentd/, by the file tools and
// by redirections, ask under the default rules (edit is allowed); a grant
// covers only the path it was asked for; the operator's deny still wins.
func TestProtectedWrites(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	for _, d := range []string{".git/hooks", "sub/.git", ".agentd/snapshot"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(".git", filepath.Join(ws, "g")); err != nil {
		t.Fatal(err)
	}
	file := func(tl tool.Permissioned, p string) []tool.Need {
		in, _ := json.Marshal(map[string]string{"filePath": p, "content": "x", "oldString": "a", "newString": "b"})
		return tl.Needs(tool.Call{Directory: ws, Input: in})
	}
	calls := map[string]func(p string) []tool.Need{
		"write": func(p string) []tool.Need { return file(Write{}, p) },
		"edit":  func(p string) []tool.Need { return file(Edit{}, p) },
		"bash":  func(p string) []tool.Need { return bashNeeds(t, ws, "echo x > "+p) },
	}
	bashGranted := []core.Rule{{Permission: "bash", Pattern: "*", Action: core.ActionAllow}}
	granted := func(needs []tool.Need) []core.Rule {
		// What "always" stores, and a grant of bash for the redirection's
		// echo: only the protected path decides.
		return append(grant(needs), bashGranted...)
	}
	allowEdit := append(permission.Defaults(), core.Rule{Permission: "edit", Pattern: "*", Action: core.ActionAllow})
	denyGit := append(permission.Defaults(), core.Rule{Permission: "edit", Pattern: ".git/*", Action: core.ActionDeny})
	for name, needs := range calls {
		for _, p := range []string{".git/config", "sub/.git/hooks/pre-commit", ".agentd/snapshot/config", "g/config", filepath.Join(ws, ".git/hooks/x")} {
			g := granted(needs(p))
			if got := decideWith(allowEdit, needs(p), bashGranted, false); got != core.ActionAsk {
				t.Errorf("%s %s with edit allowed: %s, want ask", name, p, got)
			}
			if got := decideWith(allowEdit, needs(p), g, false); got != core.ActionAllow {
				t.Errorf("%s %s after always: %s, want allow", name, p, got)
			}
			if got := decideWith(allowEdit, needs(".git/HEAD"), g, false); got != core.ActionAsk {
				t.Errorf("%s .git/HEAD after always on %s: %s, want ask", name, p, got)
			}
			if strings.Contains(p, ".git/config") {
				if got := decideWith(denyGit, needs(p), g, false); got != core.ActionDeny {
					t.Errorf("%s %s under an edit deny: %s", name, p, got)
				}
			}
		}
		for _, p := range []string{"src/x.go", ".gitignore", ".github/workflows/ci.yml", "gitx/config"} {
			if got := decideWith(permission.Defaults(), needs(p), granted(nil), false); got != core.ActionAllow {
				t.Errorf("%s %s: %s, want allow", name, p, got)
			}
		}
	}
	// A command that names a file there writes it, unless it only reads.
	for cmd, want := range map[string]string{"cp x .git/hooks/pre-commit": core.ActionAsk, "cat .git/config": core.ActionAllow,
		"tee .agentd/x < y": core.ActionAsk, "cd .git && echo x > config": core.ActionAsk, "cd sub/.git; cp x hooks/y": core.ActionAsk} {
		if got := decideWith(permission.Defaults(), bashNeeds(t, ws, cmd), granted(nil), false); got != want {
			t.Errorf("%q: %s, want %s", cmd, got, want)
		}
	}
}
