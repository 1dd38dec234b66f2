package workspace

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/safegit/safegittest"
	"github.com/agentd/agentd/internal/snapshot"
)

// repo makes a git repository of files, committed, with a main branch.
func repo(t *testing.T, files map[string]string) (string, func(args ...string) string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir := tree(t, files)
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %s", args, out)
		}
		return string(out)
	}
	git("init", "-q")
	git("add", ".")
	git("commit", "-qm", "init")
	return dir, git
}

func files(diffs []snapshot.FileDiff) string {
	var out []string
	for _, d := range diffs {
		out = append(out, d.File+":"+d.Status)
	}
	return strings.Join(out, ",")
}

// TestVcsDiff: mode git is the work tree against HEAD, new files
// included as added (their patch from a private index: the project's is
// untouched), sorted, with the context asked for; what hidden names is
// left out; mode branch is against the merge base with main.
func TestVcsDiff(t *testing.T) {
	t.Parallel()
	dir, git := repo(t, map[string]string{"a.txt": "1\n2\n3\n4\n5\n6\n7\n8\n", "gone.txt": "x\n", "sub/b.txt": "b\n", "prod.env": "K=1\n"})
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("1\n2\n3\n4\nfive\n6\n7\n8\n"), 0o644)
	os.Remove(filepath.Join(dir, "gone.txt"))
	os.WriteFile(filepath.Join(dir, "new.txt"), []byte("n1\nn2\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "prod.env"), []byte("K=2\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "secret.env"), []byte("S=1\n"), 0o644)
	index, _ := os.ReadFile(filepath.Join(dir, ".git", "index"))
	hidden := func(rel string) bool { return strings.HasSuffix(rel, ".env") }

	got, err := VcsDiff(t.Context(), dir, DiffOptions{Mode: ModeGit, Context: 1, Hidden: hidden})
	if err != nil {
		t.Fatal(err)
	}
	if s := files(got); s != "a.txt:modified,gone.txt:deleted,new.txt:added" {
		t.Fatalf("files = %s", s)
	}
	if a := got[0]; a.Additions != 1 || a.Deletions != 1 || !strings.Contains(a.Patch, "@@ -4,3 +4,3 @@") {
		t.Errorf("a.txt = %+v", a)
	}
	if n := got[2]; n.Additions != 2 || !strings.Contains(n.Patch, "+n1\n+n2\n") || !strings.Contains(n.Patch, "new file mode") {
		t.Errorf("new.txt = %+v", n)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, ".git", "index")); string(after) != string(index) {
		t.Error("the project's index changed")
	}
	// The empty blob an intent to add records went to a private store.
	if _, err := os.Stat(filepath.Join(dir, ".git", "objects", "e6", "9de29bb2d1d6434b8b29ae775ad8c2e48c5391")); !os.IsNotExist(err) {
		t.Errorf("an object was written into the project's store: %v", err)
	}
	if out := git("status", "--porcelain"); !strings.Contains(out, "?? new.txt") {
		t.Errorf("new.txt is no longer untracked: %s", out)
	}
	// The whole file as context by default.
	whole, _ := VcsDiff(t.Context(), dir, DiffOptions{Mode: ModeGit, Context: -1})
	if !strings.Contains(whole[0].Patch, "@@ -1,8 +1,8 @@") || files(whole) != "a.txt:modified,gone.txt:deleted,new.txt:added,prod.env:modified,secret.env:added" {
		t.Errorf("whole = %s %q", files(whole), whole[0].Patch)
	}
	// From a subdirectory: its files only.
	os.WriteFile(filepath.Join(dir, "sub", "b.txt"), []byte("b2\n"), 0o644)
	sub, _ := VcsDiff(t.Context(), filepath.Join(dir, "sub"), DiffOptions{Mode: ModeGit, Context: 3})
	if files(sub) != "sub/b.txt:modified" {
		t.Errorf("sub = %s", files(sub))
	}

	// Branch mode: against where the branch left main (none on main).
	if b, _ := VcsDiff(t.Context(), dir, DiffOptions{Mode: ModeBranch, Context: 3}); len(b) != 0 {
		t.Errorf("on main, branch mode = %s", files(b))
	}
	git("checkout", "-q", "-b", "feature")
	git("add", "a.txt")
	git("commit", "-qm", "a on feature")
	os.WriteFile(filepath.Join(dir, "sub", "b.txt"), []byte("b\n"), 0o644)
	b, err := VcsDiff(t.Context(), dir, DiffOptions{Mode: ModeBranch, Context: 3, Hidden: hidden})
	if err != nil {
		t.Fatal(err)
	}
	if s := files(b); s != "a.txt:modified,gone.txt:deleted,new.txt:added" {
		t.Errorf("branch mode = %s", s)
	}

	// Outside a repository: nothing.
	if d, err := VcsDiff(t.Context(), t.TempDir(), DiffOptions{Mode: ModeGit}); err != nil || len(d) != 0 {
		t.Errorf("outside a repository: %v %v", d, err)
	}
}

// TestVcsRawApplies: the raw patch of the work tree, applied to a clean
// copy with git apply, makes the same files.
func TestVcsRawApplies(t *testing.T) {
	t.Parallel()
	dir, git := repo(t, map[string]string{"a.txt": "1\n2\n3\n", "b.txt": "b\n"})
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("1\ntwo\n3\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "c.txt"), []byte("c\n"), 0o644)
	os.Remove(filepath.Join(dir, "b.txt"))
	raw, err := VcsRaw(t.Context(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	git("stash", "-u", "-q")
	if err := VcsApply(t.Context(), dir, raw, nil); err != nil {
		t.Fatalf("apply the raw patch: %v\n%s", err, raw)
	}
	for f, want := range map[string]string{"a.txt": "1\ntwo\n3\n", "c.txt": "c\n"} {
		if b, _ := os.ReadFile(filepath.Join(dir, f)); string(b) != want {
			t.Errorf("%s = %q", f, b)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "b.txt")); !os.IsNotExist(err) {
		t.Errorf("b.txt: %v", err)
	}
}

// TestVcsApply: a patch is applied all or nothing; one that does not
// apply changes nothing and says not-clean; outside a repository,
// non-git; a patch naming a denied file (by either of a rename's names)
// is refused before anything is written; git refuses paths beyond a
// symbolic link or into .git.
func TestVcsApply(t *testing.T) {
	t.Parallel()
	dir, _ := repo(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n", "keep/k.env": "k\n"})
	os.Symlink(t.TempDir(), filepath.Join(dir, "out"))
	patch := func(file, from, to string) string {
		return "diff --git a/" + file + " b/" + file + "\n--- a/" + file + "\n+++ b/" + file + "\n@@ -1 +1 @@\n-" + from + "\n+" + to + "\n"
	}
	denied := func(rel string) bool { return strings.HasSuffix(rel, ".env") }
	if err := VcsApply(t.Context(), dir, patch("a.txt", "a", "A")+patch("b.txt", "b", "B"), denied); err != nil {
		t.Fatal(err)
	}
	var ae *ApplyError
	if err := VcsApply(t.Context(), dir, patch("a.txt", "A", "AA")+patch("b.txt", "nope", "x"), denied); !errors.As(err, &ae) || ae.Reason != "not-clean" {
		t.Errorf("a patch that does not apply: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "A\n" {
		t.Errorf("a.txt changed by a patch that did not apply: %q", b)
	}
	rename := "diff --git a/keep/k.env b/k.txt\nsimilarity index 100%\nrename from keep/k.env\nrename to k.txt\n"
	var de *DeniedError
	for _, p := range []string{patch("keep/k.env", "k", "x"), rename, patch("a.txt", "A", "B") + patch("keep/k.env", "k", "x")} {
		if err := VcsApply(t.Context(), dir, p, denied); !errors.As(err, &de) {
			t.Errorf("a patch naming a denied file: %v", err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "A\n" {
		t.Errorf("a.txt changed by a refused patch: %q", b)
	}
	for _, p := range []string{
		"diff --git a/out/x.txt b/out/x.txt\nnew file mode 100644\n--- /dev/null\n+++ b/out/x.txt\n@@ -0,0 +1 @@\n+x\n",
		"diff --git a/.git/hooks/pre-commit b/.git/hooks/pre-commit\nnew file mode 100755\n--- /dev/null\n+++ b/.git/hooks/pre-commit\n@@ -0,0 +1 @@\n+x\n",
		"diff --git a/../x.txt b/../x.txt\nnew file mode 100644\n--- /dev/null\n+++ b/../x.txt\n@@ -0,0 +1 @@\n+x\n",
	} {
		if err := VcsApply(t.Context(), dir, p, denied); !errors.As(err, &ae) {
			t.Errorf("git applied an unsafe path: %v\n%s", err, p)
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "out")); len(entries) != 0 {
		t.Errorf("written beyond a symbolic link: %v", entries)
	}
	if err := VcsApply(t.Context(), t.TempDir(), patch("a.txt", "a", "b"), nil); !errors.As(err, &ae) || ae.Reason != "non-git" {
		t.Errorf("outside a repository: %v", err)
	}
	if err := VcsApply(t.Context(), dir, strings.Repeat("x", MaxApplyBytes+1), nil); !errors.Is(err, ErrPatchTooLarge) {
		t.Errorf("a patch over the bound: %v", err)
	}
}

// TestVcsRunsNoProjectCode: diffs (with new files, through a private
// index) and apply read a repository whose configuration and attributes
// name commands for every file; none runs, and no git sees the server's
// environment.
func TestVcsRunsNoProjectCode(t *testing.T) {
	t.Setenv(safegittest.SecretVar, "sk-secret")
	tr := safegittest.New(t)
	defer tr.Check(t)
	tr.WriteSide(t)
	dir, _ := repo(t, map[string]string{"a.txt": "1\n", "doc.md": "# x\n"})
	f, err := os.OpenFile(filepath.Join(dir, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(tr.Config())
	f.Close()
	os.WriteFile(filepath.Join(dir, ".gitattributes"), []byte(tr.Attributes()), 0o644)
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("2\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "new.md"), []byte("n\n"), 0o644)
	for _, mode := range []string{ModeGit, ModeBranch} {
		if _, err := VcsDiff(t.Context(), dir, DiffOptions{Mode: mode, Context: -1}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := VcsRaw(t.Context(), dir, nil); err != nil {
		t.Fatal(err)
	}
	p := "diff --git a/doc.md b/doc.md\n--- a/doc.md\n+++ b/doc.md\n@@ -1 +1 @@\n-# x\n+# y\n"
	if err := VcsApply(t.Context(), dir, p, nil); err != nil {
		t.Fatal(err)
	}
}

func TestPatchFiles(t *testing.T) {
	t.Parallel()
	p := "diff --git a/x y.txt b/x y.txt\n--- a/x y.txt\t2024\n+++ b/x y.txt\t2024\n" +
		"diff --git \"a/q\\tz\" \"b/q\\tz\"\n" +
		"diff --git a/old.go b/new.go\nrename from old.go\nrename to new.go\n" +
		"--- a/plain.c\n+++ b/plain.c\n"
	if got := strings.Join(patchFiles(p), "|"); got != "x y.txt|q\tz|old.go|new.go|plain.c" {
		t.Errorf("files = %q", got)
	}
}
