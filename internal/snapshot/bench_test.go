package snapshot

import (
	"fmt"
	"strings"
	"testing"
)

// benchWorkspace is a project of n files of about 4 KB each.
func benchWorkspace(b *testing.B, n int) string {
	b.Helper()
	dir := b.TempDir()
	body := strings.Repeat("a line of source code, more or less\n", 110)
	for i := range n {
		write(b, dir, fmt.Sprintf("pkg%d/file%d.go", i%50, i), body)
	}
	return dir
}

// BenchmarkTrack is what a step pays to snapshot a 1,000-file workspace
// in which one file changed since the last snapshot.
func BenchmarkTrack(b *testing.B) {
	s := New(Options{Dir: b.TempDir()})
	if !s.Enabled() {
		b.Skip("git is not installed")
	}
	dir := benchWorkspace(b, 1000)
	ctx := b.Context()
	if _, err := s.Track(ctx, dir); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		write(b, dir, "pkg0/file0.go", fmt.Sprintf("changed %d\n", i))
		if _, err := s.Track(ctx, dir); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDiffRestore is an undo of one step that changed ten files of a
// 1,000-file workspace: the diff listed, then the files restored.
func BenchmarkDiffRestore(b *testing.B) {
	s := New(Options{Dir: b.TempDir()})
	if !s.Enabled() {
		b.Skip("git is not installed")
	}
	dir := benchWorkspace(b, 1000)
	ctx := b.Context()
	before, err := s.Track(ctx, dir)
	if err != nil {
		b.Fatal(err)
	}
	for i := range 10 {
		write(b, dir, fmt.Sprintf("pkg%d/file%d.go", i, i), "rewritten\n")
	}
	after, err := s.Track(ctx, dir)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		files, err := s.Changed(ctx, dir, before, after)
		if err != nil || len(files) != 10 {
			b.Fatalf("changed %v %v", files, err)
		}
		if _, err := s.Diff(ctx, dir, before, after); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Restore(ctx, dir, before, files); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRevert2000 is the undo of a step that rewrote every file of a
// 2,000-file workspace: the snapshot of the present, the plan, and the
// files written back (what a revert does before it records its end). On
// the per-file restore it replaced (two git processes per file, each over
// the whole tree) this took 23 s on the development machine (BENCHMARKS.md).
func BenchmarkRevert2000(b *testing.B) {
	s := New(Options{Dir: b.TempDir()})
	if !s.Enabled() {
		b.Skip("git is not installed")
	}
	dir := benchWorkspace(b, 2000)
	ctx := b.Context()
	before, err := s.Track(ctx, dir)
	if err != nil {
		b.Fatal(err)
	}
	var want []Source
	for i := range 2000 {
		f := fmt.Sprintf("pkg%d/file%d.go", i%50, i)
		want = append(want, Source{Path: f, Tree: before})
	}
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		for _, f := range want {
			write(b, dir, f.Path, "rewritten\n")
		}
		b.StartTimer()
		present, err := s.Track(ctx, dir)
		if err != nil {
			b.Fatal(err)
		}
		p, err := s.Plan(ctx, dir, want, present)
		if err != nil || len(p.Steps) != 2000 {
			b.Fatalf("plan: %d steps, %v", len(p.Steps), err)
		}
		if err := s.Apply(ctx, dir, p, false, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// largeDiff is a workspace of 200 files of about 64 KB, each rewritten
// between the two snapshots it returns: a diff of about 25 MB of patch
// text, which git writes and the store reads.
func largeDiff(b *testing.B, s *Store) (dir, before, after string) {
	b.Helper()
	dir = b.TempDir()
	line := strings.Repeat("x", 63) + "\n"
	for i := range 200 {
		write(b, dir, fmt.Sprintf("f%03d.txt", i), strings.Repeat(line, 1024))
	}
	ctx := b.Context()
	before, err := s.Track(ctx, dir)
	if err != nil {
		b.Fatal(err)
	}
	line = strings.Repeat("y", 63) + "\n"
	for i := range 200 {
		write(b, dir, fmt.Sprintf("f%03d.txt", i), strings.Repeat(line, 1024))
	}
	if after, err = s.Track(ctx, dir); err != nil {
		b.Fatal(err)
	}
	return dir, before, after
}

// BenchmarkDiffLarge is the diff of a step that rewrote 200 files of 64
// KB: B/op is what a diff holds (git's whole output before the store read
// it as it comes).
func BenchmarkDiffLarge(b *testing.B) {
	s := New(Options{Dir: b.TempDir()})
	if !s.Enabled() {
		b.Skip("git is not installed")
	}
	dir, before, after := largeDiff(b, s)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		d, err := s.Diff(b.Context(), dir, before, after)
		if err != nil || len(d) != 200 {
			b.Fatalf("%d files, %v", len(d), err)
		}
	}
}

// BenchmarkDiffEachLarge is BenchmarkDiffLarge as GET /session/{id}/diff
// reads it: each file handed on as git writes it.
func BenchmarkDiffEachLarge(b *testing.B) {
	s := New(Options{Dir: b.TempDir()})
	if !s.Enabled() {
		b.Skip("git is not installed")
	}
	dir, before, after := largeDiff(b, s)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		n := 0
		err := s.DiffEach(b.Context(), dir, before, after, func(FileDiff) error { n++; return nil })
		if err != nil || n != 200 {
			b.Fatalf("%d files, %v", n, err)
		}
	}
}
