package workspace

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestGrepLongLines: a file with a line over 1 MiB (minified code, a
// data dump) does not cost the search its other matches, in that file or
// others, through ripgrep or the walker (rg's event for such a line
// stopped the reader, and the answer lost everything after it); the
// long line is cut (walker) or skipped (ripgrep), never returned whole.
func TestGrepLongLines(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 3<<20) + " needle at the end of a long line\n"
	dir := tree(t, map[string]string{
		"a.txt": long + "needle on line two\n",
		"b.txt": "needle in b\n",
		"c.txt": strings.Repeat("y", 2<<20) + "\nneedle after a long line without a match\n",
	})
	modes := map[string]string{"walker": ""}
	if rg, err := exec.LookPath("rg"); err == nil {
		modes["ripgrep"] = rg
	} else if os.Getenv("AGENTD_RIPGREP_REQUIRED") != "" {
		t.Fatal("rg is not installed")
	}
	for mode, rg := range modes {
		got, err := grep(t.Context(), dir, "needle", rg)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		found := map[string]bool{}
		for _, m := range got {
			found[m.Path.Text+":"+strings.Repeat("I", m.LineNumber)] = true
			if len(m.Lines.Text) > maxLine+8 {
				t.Errorf("%s: a line of %d bytes came back", mode, len(m.Lines.Text))
			}
		}
		for _, want := range []string{"a.txt:II", "b.txt:I", "c.txt:II"} {
			if !found[want] {
				t.Errorf("%s: no match at %s in %v", mode, want, found)
			}
		}
	}
}

// TestReadLine: a line longer than the limit is cut to it, its whole
// size reported, and the next line read whole.
func TestReadLine(t *testing.T) {
	t.Parallel()
	dir := tree(t, map[string]string{"f": strings.Repeat("z", 200_000) + "\nshort\nlast"})
	f, err := os.Open(dir + "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	br := newReader(f)
	for _, want := range []struct {
		len, size int
		end       bool
	}{{1000, 200_001, false}, {6, 6, false}, {4, 4, true}} {
		line, size, err := readLine(br, 1000)
		if len(line) != want.len || size != want.size || (err != nil) != want.end {
			t.Errorf("readLine = %d bytes of %d, %v; want %d of %d", len(line), size, err, want.len, want.size)
		}
	}
}

func newReader(f *os.File) *bufio.Reader { return bufio.NewReaderSize(f, 4096) }
