package command

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestExpand(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ template, args, want string }{
		{"Review $ARGUMENTS carefully", "the parser", "Review the parser carefully"},
		{"Compare $1 with $2", "a.go b.go", "Compare a.go with b.go"},
		{"Rename $1 to $2", `old "new name" extra`, "Rename old to new name extra"},
		{"Fix $1 then $3", "one", "Fix one then "},
		{"Run the tests", "", "Run the tests"},
		{"Run the tests", "quickly please", "Run the tests\n\nquickly please"},
		{"$ARGUMENTS and $ARGUMENTS", "x", "x and x"},
		{"Cost $0", "a", "Cost "},
	} {
		if got := Expand(tc.template, tc.args); got != tc.want {
			t.Errorf("Expand(%q, %q) = %q, want %q", tc.template, tc.args, got, tc.want)
		}
	}
}

func TestLoadDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "git"), 0o755)
	os.WriteFile(filepath.Join(dir, "review.md"), []byte("---\ndescription: Review a file\nagent: plan\nmodel: fake/fake-model\nsubtask: true\n---\nReview $ARGUMENTS.\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "git", "commit.md"), []byte("Write a commit message for the staged changes."), 0o644)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not a command"), 0o644)
	s := Set{}
	if err := s.LoadDir(dir); err != nil {
		t.Fatal(err)
	}
	if err := s.LoadDir(filepath.Join(dir, "missing")); err != nil {
		t.Errorf("a missing directory: %v", err)
	}
	want := []Command{
		{Name: "git/commit", Template: "Write a commit message for the staged changes.", Source: "command", Hints: []string{}},
		{Name: "review", Description: "Review a file", Agent: "plan", Model: "fake/fake-model", Subtask: true, Template: "Review $ARGUMENTS.",
			Source: "command", Hints: []string{"$ARGUMENTS"}},
	}
	if diff := cmp.Diff(want, s.List()); diff != "" {
		t.Errorf("commands (-want +got):\n%s", diff)
	}
	for name, body := range map[string]string{"open.md": "---\ndescription: x\n", "empty.md": "---\ndescription: x\n---\n", "bad.md": "---\n: : :\n---\nT"} {
		bad := t.TempDir()
		os.WriteFile(filepath.Join(bad, name), []byte(body), 0o644)
		if err := (Set{}).LoadDir(bad); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: error %v, want one naming the file", name, err)
		}
	}
}

func TestHints(t *testing.T) {
	t.Parallel()
	got := Hints("Move $2 to $10, then $1; $2 again, and $ARGUMENTS")
	if diff := cmp.Diff([]string{"$1", "$2", "$10", "$ARGUMENTS"}, got); diff != "" {
		t.Errorf("hints (-want +got):\n%s", diff)
	}
}

// FuzzExpand: arguments come from clients; any of them expands without a
// panic, and $ARGUMENTS always receives them whole.
func FuzzExpand(f *testing.F) {
	f.Add("Do $1 and $2: $ARGUMENTS", `a "b c" 'd`)
	f.Add("$9$1$ARGUMENTS$", "x")
	f.Fuzz(func(t *testing.T, template, args string) {
		out := Expand(template, args)
		if template == "$ARGUMENTS" && out != strings.TrimSpace(args) {
			t.Errorf("Expand($ARGUMENTS, %q) = %q", args, out)
		}
	})
}

// FuzzParse: command files are read at start; none makes Parse panic.
func FuzzParse(f *testing.F) {
	f.Add([]byte("---\ndescription: d\n---\nT $1"))
	f.Add([]byte("---\n---"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = Parse("x", data)
	})
}
