package snapshot

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestDiffBounded: a diff whose patches pass 4 MiB in all holds no more
// than that: each file's patch is cut at 256 KiB, files past the budget
// come with a note and no patch, the counts stay exact; a line longer
// than the reader's buffer is counted once.
func TestDiffBounded(t *testing.T) {
	t.Parallel()
	s := newStore(t, Options{MaxFileBytes: 1 << 30})
	ws := t.TempDir()
	ctx := t.Context()
	before, err := s.Track(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Repeat("z", 99) + "\n"
	for i := range 24 {
		write(t, ws, fmt.Sprintf("f%02d.txt", i), strings.Repeat(line, 3000)) // 300 KB
	}
	write(t, ws, "zlong.txt", strings.Repeat("q", 1<<20)+"\nend\n")
	after, err := s.Track(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	diffs, err := s.Diff(ctx, ws, before, after)
	if err != nil {
		t.Fatal(err)
	}
	if len(diffs) != 25 {
		t.Fatalf("%d files", len(diffs))
	}
	total := 0
	for _, d := range diffs {
		total += len(d.Patch)
		want := 3000
		if d.File == "zlong.txt" {
			want = 2
		}
		if d.Additions != want || d.Status != Added {
			t.Errorf("%s: %d additions, %s", d.File, d.Additions, d.Status)
		}
		if len(d.Patch) > maxPatch+len(cutNote)+len(fullNote)+1 {
			t.Errorf("%s: a patch of %d bytes", d.File, len(d.Patch))
		}
	}
	if total > maxDiff+25*(len(fullNote)+len(cutNote)+1) {
		t.Errorf("the diff's patches hold %d bytes", total)
	}
	if last := diffs[len(diffs)-1]; last.Patch != fullNote {
		t.Errorf("a file past the budget: %.200q", last.Patch)
	}
	if first := diffs[0]; !strings.HasSuffix(first.Patch, cutNote) || !strings.HasPrefix(first.Patch, "diff --git a/f00.txt") {
		t.Errorf("a file over 256 KiB: %.100q … %q", first.Patch, first.Patch[max(0, len(first.Patch)-40):])
	}
}

// TestDiffEachStops: an error of the callback ends the diff (and its
// git) and is returned.
func TestDiffEachStops(t *testing.T) {
	t.Parallel()
	s := newStore(t, Options{})
	ws := t.TempDir()
	before, _ := s.Track(t.Context(), ws)
	for i := range 50 {
		write(t, ws, fmt.Sprintf("f%02d.txt", i), strings.Repeat("x\n", 5000))
	}
	after, _ := s.Track(t.Context(), ws)
	stop := errors.New("client went away")
	n := 0
	err := s.DiffEach(t.Context(), ws, before, after, func(FileDiff) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Errorf("DiffEach = %v after %d files", err, n)
	}
}

// TestDiffGone: a snapshot the store does not hold (taken in the old
// store, or pruned) is ErrGone, not a git failure.
func TestDiffGone(t *testing.T) {
	t.Parallel()
	s := newStore(t, Options{})
	ws := t.TempDir()
	write(t, ws, "a.txt", "1\n")
	h, err := s.Track(t.Context(), ws)
	if err != nil {
		t.Fatal(err)
	}
	missing := strings.Repeat("ab", 20)
	if _, err := s.Diff(t.Context(), ws, missing, h); !errors.Is(err, ErrGone) {
		t.Errorf("Diff from a missing snapshot: %v", err)
	}
	if _, err := s.Changed(t.Context(), ws, h, missing); !errors.Is(err, ErrGone) {
		t.Errorf("Changed to a missing snapshot: %v", err)
	}
}

// TestParsePatchSpaceNames: git ends a ---/+++ path holding a space with
// a tab; the file's name has none.
func TestParsePatchSpaceNames(t *testing.T) {
	t.Parallel()
	out := "diff --git a/name with space.txt b/name with space.txt\nindex 1..2 100644\n--- a/name with space.txt\t\n+++ b/name with space.txt\t\n@@ -1 +1 @@\n-a\n+b\n" +
		"diff --git a/gone now.txt b/gone now.txt\ndeleted file mode 100644\n--- a/gone now.txt\t\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n"
	d := parseAll(t, out)
	if len(d) != 2 || d[0].File != "name with space.txt" || d[1].File != "gone now.txt" || d[1].Status != Deleted {
		t.Errorf("parsed %+v", d)
	}
}
