package snapshot

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// files reads every file of a workspace but the snapshot store: path →
// content ("-> target" for a symbolic link).
func files(t *testing.T, ws string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(ws, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(ws, p)
		if d.IsDir() && rel == ".agentd" {
			return filepath.SkipDir
		}
		switch {
		case d.Type()&os.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "-> " + target
		case !d.IsDir():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func track(t *testing.T, s *Store, ws string) string {
	t.Helper()
	h, err := s.Track(t.Context(), ws)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func sameFiles(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s:\n got %v\nwant %v", what, got, want)
	}
}

// TestRestoreLeavesUntrackedFiles: a revert deletes a file only when the
// snapshots prove a step made it. A user's ignored file that a rewritten
// .gitignore brought into a step's snapshot, and a file grown over the size
// limit, are left in place and reported; the rest is restored.
func TestRestoreLeavesUntrackedFiles(t *testing.T) {
	t.Parallel()
	s := newStore(t, Options{MaxFileBytes: 100})
	ws := t.TempDir()
	write(t, ws, ".gitignore", "*.log\n")
	write(t, ws, "user.log", "the user's own log\n")
	write(t, ws, "a.txt", "a1\n")
	before := track(t, s, ws)
	// The step: un-ignores the logs, changes a.txt, makes grow.bin and
	// new.txt.
	write(t, ws, ".gitignore", "# nothing ignored\n")
	write(t, ws, "a.txt", "a2\n")
	write(t, ws, "grow.bin", "small\n")
	write(t, ws, "new.txt", "made by the step\n")
	after := track(t, s, ws)
	changed, err := s.Changed(t.Context(), ws, before, after)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(changed, ",") != ".gitignore,a.txt,grow.bin,new.txt,user.log" {
		t.Fatalf("changed = %v", changed)
	}
	// Since: grow.bin grew past the limit.
	write(t, ws, "grow.bin", strings.Repeat("x", 1000))
	p, err := s.Restore(t.Context(), ws, before, changed)
	if err != nil {
		t.Fatal(err)
	}
	sameFiles(t, "after the restore", files(t, ws), map[string]string{
		".gitignore": "*.log\n", "a.txt": "a1\n", "grow.bin": strings.Repeat("x", 1000), "user.log": "the user's own log\n",
	})
	kept := map[string]string{}
	for _, k := range p.Kept {
		kept[k.Path] = k.Reason
	}
	if kept["user.log"] != KeptIgnored || kept["grow.bin"] != KeptUntracked || len(kept) != 2 {
		t.Errorf("kept = %v", p.Kept)
	}
}

// TestRestoreRefusesSymlinkedWay: a file whose folder became a symbolic
// link (here to outside the workspace) is refused with a reason and
// nothing changes; when the plan itself deletes the link (a step made it),
// the folder is restored in its place.
func TestRestoreRefusesSymlinkedWay(t *testing.T) {
	t.Parallel()
	s := newStore(t, Options{})
	ws := t.TempDir()
	write(t, ws, "d/f.txt", "v1\n")
	write(t, ws, "g.txt", "g1\n")
	before := track(t, s, ws)
	write(t, ws, "g.txt", "g2\n")
	outside := t.TempDir()
	write(t, outside, "f.txt", "precious\n")
	os.RemoveAll(filepath.Join(ws, "d"))
	if err := os.Symlink(outside, filepath.Join(ws, "d")); err != nil {
		t.Fatal(err)
	}
	_, err := s.Restore(t.Context(), ws, before, []string{"g.txt", "d/f.txt"})
	var re *RefusedError
	if !errors.As(err, &re) || re.Path != "d/f.txt" || !strings.Contains(re.Reason, "symbolic link") {
		t.Fatalf("restore through a symlink: %v", err)
	}
	if read(t, outside, "f.txt") != "precious\n" || read(t, ws, "g.txt") != "g2\n" {
		t.Fatal("a refused restore changed files")
	}
	if _, err := s.Restore(t.Context(), ws, before, []string{"d", "d/f.txt", "g.txt"}); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, "with the link in the plan", files(t, ws), map[string]string{"d/f.txt": "v1\n", "g.txt": "g1\n"})
	if read(t, outside, "f.txt") != "precious\n" {
		t.Error("the restore wrote through the link")
	}
	for _, bad := range []string{"../x", "/etc/passwd", "a/../../x", ""} {
		if _, err := s.Restore(t.Context(), ws, before, []string{bad}); !errors.As(err, &re) {
			t.Errorf("restore of %q: %v", bad, err)
		}
	}
}

// TestApplyResumesAndRollsBack: a plan applied part way (a crash between
// files) ends in the same files when applied again, forward or back; the
// rollback gives back exactly the workspace it was planned on, types and
// modes included, and never writes through a hard link.
func TestApplyResumesAndRollsBack(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t, Options{})
	ws := t.TempDir()
	write(t, ws, "keep.txt", "same\n")
	write(t, ws, "mod.txt", "m1\n")
	write(t, ws, "gone.txt", "removed by the step\n")
	write(t, ws, "x", "a file that becomes a folder\n")
	write(t, ws, "run.sh", "#!/bin/sh\n")
	os.Chmod(filepath.Join(ws, "run.sh"), 0o755)
	os.Symlink("keep.txt", filepath.Join(ws, "ln"))
	before := track(t, s, ws)
	write(t, ws, "mod.txt", "m2\n")
	os.Remove(filepath.Join(ws, "gone.txt"))
	os.Remove(filepath.Join(ws, "x"))
	write(t, ws, "x/inner.txt", "now a folder\n")
	write(t, ws, "new/deep/n.txt", "new\n")
	os.Chmod(filepath.Join(ws, "run.sh"), 0o644)
	os.Remove(filepath.Join(ws, "ln"))
	os.Symlink("mod.txt", filepath.Join(ws, "ln"))
	outside := t.TempDir()
	write(t, outside, "shared.txt", "outside\n")
	os.Remove(filepath.Join(ws, "mod.txt"))
	if err := os.Link(filepath.Join(outside, "shared.txt"), filepath.Join(ws, "mod.txt")); err != nil {
		t.Skip("no hard links here:", err)
	}
	present := track(t, s, ws)
	changed, _ := s.Changed(ctx, ws, before, present)
	want := make([]Source, len(changed))
	for i, f := range changed {
		want[i] = Source{Path: f, Tree: before}
	}
	p, err := s.Plan(ctx, ws, want, present)
	if err != nil {
		t.Fatal(err)
	}
	start := files(t, ws)
	stop := errors.New("crash")
	for cut := 1; cut < len(p.Steps); cut++ {
		for _, back := range []bool{false, true} {
			err := s.Apply(ctx, ws, p, false, func(done int) error {
				if done == cut {
					return stop
				}
				return nil
			})
			if !errors.Is(err, stop) {
				t.Fatalf("cut at %d: %v", cut, err)
			}
			if err := s.Apply(ctx, ws, p, back, nil); err != nil {
				t.Fatalf("cut at %d, back %v: %v", cut, back, err)
			}
			if back {
				sameFiles(t, fmt.Sprintf("rolled back after %d", cut), files(t, ws), start)
			} else {
				sameFiles(t, fmt.Sprintf("finished after %d", cut), files(t, ws), map[string]string{
					"gone.txt": "removed by the step\n", "keep.txt": "same\n", "ln": "-> keep.txt", "mod.txt": "m1\n",
					"run.sh": "#!/bin/sh\n", "x": "a file that becomes a folder\n",
				})
				if fi, _ := os.Stat(filepath.Join(ws, "run.sh")); fi.Mode().Perm()&0o100 == 0 {
					t.Error("run.sh lost its exec bit")
				}
				if err := s.Apply(ctx, ws, p, true, nil); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if read(t, outside, "shared.txt") != "outside\n" {
		t.Error("a restore wrote through a hard link to a file outside the workspace")
	}
}

// TestStaleIndexLockCleared: an index.lock left by a killed git does not
// make every later snapshot fail.
func TestStaleIndexLockCleared(t *testing.T) {
	t.Parallel()
	s := newStore(t, Options{})
	ws := t.TempDir()
	write(t, ws, "f.txt", "1")
	track(t, s, ws)
	w, _ := s.workspace(ws)
	if err := os.WriteFile(filepath.Join(w.gitDir, "index.lock"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	write(t, ws, "f.txt", "2")
	if _, err := s.Track(t.Context(), ws); err != nil {
		t.Fatalf("snapshot after a killed git: %v", err)
	}
}

// TestRestoreFewGitProcesses: restoring many files from two snapshots
// costs a handful of git processes, not one or two per file.
func TestRestoreFewGitProcesses(t *testing.T) {
	t.Parallel()
	log := os.Getenv("AGENTD_TEST_GIT_LOG")
	if log == "" {
		// git is looked up once per process: the count is taken in a
		// child of the test binary whose PATH finds a counting git first.
		real, err := exec.LookPath("git")
		if err != nil {
			t.Skip("git is not installed")
		}
		bin, log := t.TempDir(), filepath.Join(t.TempDir(), "calls")
		script := "#!/bin/sh\necho \"$*\" >> " + log + "\nexec " + real + " \"$@\"\n"
		if err := os.WriteFile(filepath.Join(bin, "git"), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1")
		cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "AGENTD_TEST_GIT_LOG="+log)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v:\n%s", err, out)
		}
		if _, err := os.Stat(log); err != nil {
			t.Fatal("the counting git never ran")
		}
		return
	}
	s := newStore(t, Options{})
	ws := t.TempDir()
	for i := range 300 {
		write(t, ws, fmt.Sprintf("d%d/f%d.txt", i%7, i), "v1\n")
	}
	one := track(t, s, ws)
	for i := range 150 {
		write(t, ws, fmt.Sprintf("d%d/f%d.txt", i%7, i), "v2\n")
	}
	two := track(t, s, ws)
	for i := range 300 {
		write(t, ws, fmt.Sprintf("d%d/f%d.txt", i%7, i), "v3\n")
	}
	present := track(t, s, ws)
	var want []Source
	for i := range 300 {
		tree := one
		if i >= 150 {
			tree = two
		}
		want = append(want, Source{Path: fmt.Sprintf("d%d/f%d.txt", i%7, i), Tree: tree})
	}
	os.Remove(log)
	p, err := s.Plan(t.Context(), ws, want, present)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(t.Context(), ws, p, false, nil); err != nil {
		t.Fatal(err)
	}
	calls, _ := os.ReadFile(log)
	if n := strings.Count(string(calls), "\n"); n > 4 {
		t.Errorf("%d git processes to restore 300 files from 2 snapshots:\n%s", n, calls)
	}
	if read(t, ws, "d0/f0.txt") != "v1\n" || read(t, ws, "d3/f199.txt") != "v1\n" {
		t.Error("not restored")
	}
}

// TestStaleLockLeftWhileAnotherProcessWorks: an index.lock is removed only
// while this process holds the store's cross-process lock; while another
// process holds it (here a second open file description), it is left.
func TestStaleLockLeftWhileAnotherProcessWorks(t *testing.T) {
	t.Parallel()
	s := newStore(t, Options{})
	ws := t.TempDir()
	write(t, ws, "f.txt", "1")
	track(t, s, ws)
	w, _ := s.workspace(ws)
	lock := filepath.Join(w.gitDir, "index.lock")
	os.WriteFile(lock, nil, 0o644)
	other := &workspace{dir: w.dir, gitDir: w.gitDir}
	if err := clearStaleLock(other); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(lock); err != nil {
		t.Fatal("an index.lock was removed without the store's lock held")
	}
	w.ops.Lock()
	held := w.ops.f != nil
	err := clearStaleLock(w)
	// Another process cannot take the store meanwhile.
	f, oerr := os.Open(w.ops.path)
	if oerr != nil {
		t.Fatal(oerr)
	}
	if ferr := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); !errors.Is(ferr, syscall.EWOULDBLOCK) {
		t.Errorf("a second process's flock while the store is held: %v", ferr)
	}
	f.Close()
	w.ops.Unlock()
	if !held || err != nil {
		t.Fatalf("the store's lock: held %v, %v", held, err)
	}
	if _, err := os.Stat(lock); !os.IsNotExist(err) {
		t.Error("a stale index.lock was kept with the store's lock held")
	}
}
