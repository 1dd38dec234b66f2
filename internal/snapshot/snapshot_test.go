package snapshot

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newStore(t *testing.T, o Options) *Store {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	s := New(o)
	if !s.Enabled() {
		if os.Getenv("AGENTD_OPENCODE_REQUIRED") != "" {
			t.Fatal("git is not installed")
		}
		t.Skip("git is not installed")
	}
	return s
}

func write(t testing.TB, dir, name, body string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

// TestTrackDiffRestore: a directory that is not a repository is
// snapshotted, changes between snapshots are listed and diffed, and
// restoring brings files back (and removes those the snapshot lacked).
func TestTrackDiffRestore(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t, Options{})
	ws := t.TempDir()
	write(t, ws, "a.txt", "one\ntwo\n")
	write(t, ws, "sub/b.txt", "bee\n")
	write(t, ws, "b/gone.txt", "in a folder named b\n")
	write(t, ws, ".gitignore", "ignored.log\n")
	write(t, ws, "ignored.log", "noise\n")
	before, err := s.Track(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	write(t, ws, "a.txt", "one\nTWO\nthree\n")
	os.Remove(filepath.Join(ws, "sub/b.txt"))
	os.Remove(filepath.Join(ws, "b/gone.txt"))
	write(t, ws, "new/c.txt", "sea\n")
	write(t, ws, "ignored.log", "more noise\n")
	after, err := s.Track(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	files, err := s.Changed(ctx, ws, before, after)
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	if diff := cmp.Diff([]string{"a.txt", "b/gone.txt", "new/c.txt", "sub/b.txt"}, files); diff != "" {
		t.Errorf("changed (-want +got):\n%s", diff)
	}
	diffs, err := s.Diff(ctx, ws, before, after)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]FileDiff{}
	for _, d := range diffs {
		got[d.File] = d
	}
	if d := got["a.txt"]; d.Status != Modified || d.Additions != 2 || d.Deletions != 1 || !strings.Contains(d.Patch, "+three") {
		t.Errorf("a.txt: %+v", d)
	}
	if d := got["new/c.txt"]; d.Status != Added || d.Additions != 1 {
		t.Errorf("new/c.txt: %+v", d)
	}
	if d := got["sub/b.txt"]; d.Status != Deleted || d.Deletions != 1 {
		t.Errorf("sub/b.txt: %+v", d)
	}
	if d := got["b/gone.txt"]; d.Status != Deleted {
		t.Errorf("b/gone.txt: %+v (of %v)", d, got)
	}
	if _, err := s.Restore(ctx, ws, before, files); err != nil {
		t.Fatal(err)
	}
	if read(t, ws, "a.txt") != "one\ntwo\n" || read(t, ws, "sub/b.txt") != "bee\n" {
		t.Errorf("restored: a=%q b=%q", read(t, ws, "a.txt"), read(t, ws, "sub/b.txt"))
	}
	if _, err := os.Stat(filepath.Join(ws, "new")); !os.IsNotExist(err) {
		t.Errorf("a file the snapshot lacked (and its folder) was kept: %v", err)
	}
	if read(t, ws, "ignored.log") != "more noise\n" {
		t.Error("an ignored file was touched")
	}
	// Forward again.
	if _, err := s.Restore(ctx, ws, after, files); err != nil {
		t.Fatal(err)
	}
	if read(t, ws, "a.txt") != "one\nTWO\nthree\n" || read(t, ws, "new/c.txt") != "sea\n" {
		t.Error("restoring the later snapshot did not bring the changes back")
	}
}

// TestProjectGitUntouched: in a git repository, snapshots leave the
// project's index, branches and stash alone, and the project's git does
// not see agentd's folder.
func TestProjectGitUntouched(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t, Options{})
	ws := t.TempDir()
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		cmd.Dir = ws
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
		return string(out)
	}
	git("init", "-q")
	write(t, ws, "f.txt", "v1\n")
	git("add", "f.txt")
	git("commit", "-qm", "first")
	write(t, ws, "f.txt", "v2\n")
	statusBefore := git("status", "--porcelain")
	if _, err := s.Track(ctx, ws); err != nil {
		t.Fatal(err)
	}
	if got := git("status", "--porcelain"); got != statusBefore {
		t.Errorf("project status changed:\n%s\nwant:\n%s", got, statusBefore)
	}
	if got := git("diff", "--cached", "--name-only"); got != "" {
		t.Errorf("project index changed: %q", got)
	}
}

// TestBigFilesLeftOut: a file over the size limit is not snapshotted.
func TestBigFilesLeftOut(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t, Options{MaxFileBytes: 100})
	ws := t.TempDir()
	write(t, ws, "small.txt", "x\n")
	write(t, ws, "big.bin", strings.Repeat("y", 1000))
	h, err := s.Track(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := s.workspace(ws)
	out, err := s.run(ctx, w, nil, "ls-tree", "-r", "--name-only", h)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "big.bin") || !strings.Contains(string(out), "small.txt") {
		t.Errorf("tree = %q", out)
	}
}

// TestConcurrentTracksShareRounds: many sessions snapshotting one
// workspace at once all get a snapshot taken after their call, in few
// rounds.
func TestConcurrentTracksShareRounds(t *testing.T) {
	t.Parallel()
	s := newStore(t, Options{})
	ws := t.TempDir()
	write(t, ws, "f.txt", "0")
	var wg sync.WaitGroup
	hashes := make([]string, 50)
	for i := range hashes {
		wg.Go(func() {
			h, err := s.Track(context.Background(), ws)
			if err != nil {
				t.Error(err)
			}
			hashes[i] = h
		})
	}
	wg.Wait()
	distinct := map[string]bool{}
	for _, h := range hashes {
		distinct[h] = true
	}
	if len(distinct) != 1 {
		t.Errorf("%d distinct snapshots of an unchanged workspace", len(distinct))
	}
}

func TestRestoreStaysInside(t *testing.T) {
	t.Parallel()
	s := newStore(t, Options{})
	ws := t.TempDir()
	write(t, ws, "f.txt", "x")
	h, err := s.Track(t.Context(), ws)
	if err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	write(t, outside, "keep.txt", "precious")
	if err := os.Symlink(outside, filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	_, err = s.Restore(t.Context(), ws, h, []string{"link/keep.txt", "../x"})
	var re *RefusedError
	if !errors.As(err, &re) {
		t.Errorf("restore through a link out of the workspace: %v, want a RefusedError", err)
	}
	if read(t, outside, "keep.txt") != "precious" {
		t.Error("a restore removed a file outside the workspace")
	}
}

func TestDisabled(t *testing.T) {
	t.Parallel()
	s := New(Options{Disabled: true})
	if _, err := s.Track(t.Context(), t.TempDir()); err != ErrUnavailable {
		t.Errorf("disabled store: %v", err)
	}
}

func TestParsePatchQuotedAndBinary(t *testing.T) {
	t.Parallel()
	out := "diff --git \"a/sp ace\\tx\" \"b/sp ace\\tx\"\nnew file mode 100644\n--- /dev/null\n+++ \"b/sp ace\\tx\"\n@@ -0,0 +1 @@\n+hi\n" +
		"diff --git a/img.png b/img.png\nindex 1..2 100644\nBinary files a/img.png and b/img.png differ\n"
	d := parseAll(t, out)
	if len(d) != 2 || d[0].File != "sp ace\tx" || d[0].Status != Added || d[0].Additions != 1 || d[1].File != "img.png" || d[1].Additions != 0 {
		t.Errorf("parsed %+v", d)
	}
}

// parseAll is parsePatch's files, all of them.
func parseAll(t *testing.T, out string) []FileDiff {
	t.Helper()
	var d []FileDiff
	if err := parsePatch(strings.NewReader(out), func(f FileDiff) error { d = append(d, f); return nil }); err != nil {
		t.Fatal(err)
	}
	return d
}
