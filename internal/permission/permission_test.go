package permission

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/internal/core"
)

func TestMatch(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		p, s string
		want bool
	}{
		{"*", "", true}, {"*", "anything at all", true}, {"git *", "git status", true}, {"git *", "gitk", false},
		{"rm -rf *", "rm -rf /", true}, {"/tmp/*", "/tmp/a/b", true}, {"a?c", "abc", true}, {"a?c", "ac", false},
		{"*.go", "x/y.go", true}, {"*.go", "y.gox", false}, {"a*b*c", "aXXbYYc", true}, {"a*b*c", "aXXbYY", false},
		{"git status *", "git status", true}, {"id *", "id", true}, {"id *", "idx", false}, {"git *", "git", true},
	} {
		if got := Match(c.p, c.s); got != c.want {
			t.Errorf("Match(%q, %q) = %v", c.p, c.s, got)
		}
	}
}

func TestParseAndEvaluate(t *testing.T) {
	t.Parallel()
	rules, err := ParseConfig([]byte(`{"edit":"ask","bash":{"*":"ask","git *":"allow","git push *":"deny"},"external_directory":"deny"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []core.Rule{
		{Permission: "edit", Pattern: "*", Action: "ask"},
		{Permission: "bash", Pattern: "*", Action: "ask"},
		{Permission: "bash", Pattern: "git *", Action: "allow"},
		{Permission: "bash", Pattern: "git push *", Action: "deny"},
		{Permission: "external_directory", Pattern: "*", Action: "deny"},
	}
	if diff := cmp.Diff(want, rules); diff != "" {
		t.Fatalf("rules (-want +got):\n%s", diff)
	}
	all := append(Defaults(), rules...)
	for _, c := range []struct{ perm, pat, want string }{
		{"bash", "ls", "ask"}, {"bash", "git status", "allow"}, {"bash", "git push origin", "deny"},
		{"edit", "a.go", "ask"}, {"read", "a.go", "allow"}, {"external_directory", "/etc", "deny"}, {"doom_loop", "bash", "ask"},
	} {
		if got := Evaluate(all, c.perm, c.pat); got != c.want {
			t.Errorf("Evaluate(%s, %s) = %s, want %s", c.perm, c.pat, got, c.want)
		}
	}
	if r, err := ParseConfig([]byte(`"deny"`)); err != nil || len(r) != 1 || r[0].Action != "deny" {
		t.Errorf("single action: %v %v", r, err)
	}
	for _, bad := range []string{`"maybe"`, `{"bash":"sometimes"}`, `{"bash":{"x":1}}`, `[1]`} {
		if _, err := ParseConfig([]byte(bad)); err == nil {
			t.Errorf("ParseConfig(%s) accepted", bad)
		}
	}
}

func TestDecideExactIgnoresWildcardGrants(t *testing.T) {
	t.Parallel()
	granted := []core.Rule{{Permission: "bash", Pattern: "find *", Action: core.ActionAllow},
		{Permission: "bash", Pattern: "sudo ls", Action: core.ActionAllow}}
	for _, c := range []struct {
		pattern string
		exact   bool
		want    string
	}{
		{"find . -name x", false, core.ActionAllow},
		{"find . -exec rm {} +", true, core.ActionAsk},
		{"sudo ls", true, core.ActionAllow},
		{"sudo ls /root", true, core.ActionAsk},
	} {
		decide := Decide
		if c.exact {
			decide = DecideExact
		}
		if got := decide(Defaults(), nil, granted, "bash", c.pattern); got != c.want {
			t.Errorf("%q (exact %v) = %s, want %s", c.pattern, c.exact, got, c.want)
		}
	}
}
