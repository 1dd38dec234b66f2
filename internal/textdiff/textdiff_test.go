package textdiff

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestUnifiedShape: the patch is jsdiff's createTwoFilesPatch's, byte for
// byte, on the cases opencode's clients see most: a line changed in the
// middle of a file, a file created, a last line without its newline.
func TestUnifiedShape(t *testing.T) {
	t.Parallel()
	head := "Index: /w/a.txt\n" + strings.Repeat("=", 67) + "\n--- /w/a.txt\n+++ /w/a.txt\n"
	for _, tc := range []struct {
		name, before, after, want string
		add, del                  int
	}{
		{"change", "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n", "1\n2\n3\n4\nfive\n6\n7\n8\n9\n10\n",
			"@@ -1,9 +1,9 @@\n 1\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n 9\n", 1, 1},
		{"create", "", "a\nb\n", "@@ -0,0 +1,2 @@\n+a\n+b\n", 2, 0},
		{"empty", "a\n", "", "@@ -1,1 +0,0 @@\n-a\n", 0, 1},
		{"no newline", "a\nb", "a\nc", "@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n", 1, 1},
		{"same", "a\n", "a\n", "", 0, 0},
	} {
		r := Unified("/w/a.txt", tc.before, tc.after, Options{})
		if r.Patch != head+tc.want || r.Additions != tc.add || r.Deletions != tc.del {
			t.Errorf("%s: %+v\nwant\n%s", tc.name, r, head+tc.want)
		}
	}
}

// TestUnifiedHunks: changes far apart make hunks of their own; close
// ones share one.
func TestUnifiedHunks(t *testing.T) {
	t.Parallel()
	var a, b []string
	for i := range 40 {
		a = append(a, strconv.Itoa(i)+"\n")
		b = append(b, strconv.Itoa(i)+"\n")
	}
	b[5], b[30], b[33] = "five\n", "thirty\n", "thirty-three\n"
	r := Unified("f", strings.Join(a, ""), strings.Join(b, ""), Options{})
	if n := strings.Count(r.Patch, "\n@@ "); n != 2 || !strings.Contains(r.Patch, "@@ -2,9 +2,9 @@") || !strings.Contains(r.Patch, "@@ -27,12 +27,12 @@") {
		t.Errorf("hunks:\n%s", r.Patch)
	}
	if r.Additions != 3 || r.Deletions != 3 {
		t.Errorf("counts %d %d", r.Additions, r.Deletions)
	}
	// A bound keeps whole hunks and says it cut.
	cut := Unified("f", strings.Join(a, ""), strings.Join(b, ""), Options{MaxBytes: len(r.Patch) - 10})
	if !cut.Cut || strings.Count(cut.Patch, "\n@@ ") != 1 || cut.Additions != 3 {
		t.Errorf("cut: %+v", cut)
	}
}

// TestUnifiedApplies: on random texts (minimal or past the budget), the
// patch applied to the text before gives the text after, with patch(1)
// when it is installed, else with the test's own reading of the hunks.
func TestUnifiedApplies(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	word := func() string { return []string{"a", "b", "c", "d", "e"}[rng.IntN(5)] }
	text := func(n int) string {
		var sb strings.Builder
		for range n {
			sb.WriteString(word() + "\n")
		}
		if rng.IntN(4) == 0 {
			sb.WriteString(word()) // no final newline
		}
		return sb.String()
	}
	patchBin, _ := exec.LookPath("patch")
	for i := range 300 {
		before := text(rng.IntN(30))
		after := text(rng.IntN(30))
		if i%50 == 0 {
			before, after = text(3000), text(3000) // past the budget
		}
		r := Unified("f", before, after, Options{})
		got := apply(t, before, r.Patch)
		if got != after {
			t.Fatalf("case %d: patch does not apply:\nbefore %q\nafter %q\ngot %q\n%s", i, before, after, got, r.Patch)
		}
		if patchBin != "" && i%10 == 0 {
			dir := t.TempDir()
			f := filepath.Join(dir, "f")
			os.WriteFile(f, []byte(before), 0o644)
			cmd := exec.Command(patchBin, "-s", "f")
			cmd.Dir, cmd.Stdin = dir, strings.NewReader(r.Patch)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("case %d: patch(1): %v %s\n%s", i, err, out, r.Patch)
			}
			if b, _ := os.ReadFile(f); string(b) != after {
				t.Fatalf("case %d: patch(1) made %q, want %q", i, b, after)
			}
		}
	}
}

// apply reads the hunks of p and applies them to before.
func apply(t *testing.T, before, p string) string {
	t.Helper()
	a := split(before)
	var out []string
	at := 0 // next line of a to copy
	lines := strings.SplitAfter(p, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if !strings.HasPrefix(l, "@@ -") {
			continue
		}
		var os, ol, ns, nl int
		if _, err := fmt.Sscanf(l, "@@ -%d,%d +%d,%d @@", &os, &ol, &ns, &nl); err != nil {
			t.Fatalf("hunk header %q: %v", l, err)
		}
		start := os - 1
		if ol == 0 {
			start = os
		}
		out = append(out, a[at:start]...)
		at = start
		for i+1 < len(lines) && lines[i+1] != "" && !strings.HasPrefix(lines[i+1], "@@ ") {
			i++
			l := lines[i]
			body := l[1:]
			if i+1 < len(lines) && strings.HasPrefix(lines[i+1], "\\ No newline") {
				body = strings.TrimSuffix(body, "\n")
				i++
			}
			switch l[0] {
			case ' ':
				out = append(out, body)
				at++
			case '-':
				at++
			case '+':
				out = append(out, body)
			}
		}
	}
	out = append(out, a[at:]...)
	return strings.Join(out, "")
}

func BenchmarkUnifiedEdit(b *testing.B) {
	var sb strings.Builder
	for i := range 20000 {
		sb.WriteString("line " + strconv.Itoa(i) + "\n")
	}
	before := sb.String()
	after := strings.Replace(before, "line 10000\n", "changed\n", 1)
	for b.Loop() {
		Unified("f", before, after, Options{MaxBytes: 32 << 10})
	}
}
