package snapshot

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/safegit/safegittest"
)

// plantOldStore writes, inside the workspace, what a cloned repository
// would ship as agentd's snapshot store of before: a git directory at
// .agentd/snapshot whose config names the trap's filter.
func plantOldStore(t *testing.T, ws string, tr *safegittest.Trap) {
	t.Helper()
	old := filepath.Join(ws, OldDir)
	for _, d := range []string{"objects", "refs/heads", "info"} {
		if err := os.MkdirAll(filepath.Join(old, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, old, "HEAD", "ref: refs/heads/main\n")
	write(t, old, "config", "[core]\n\trepositoryformatversion = 0\n"+tr.Config())
	write(t, old, "info/attributes", tr.Attributes())
}

// TestClonedOldStoreRunsNothing: a repository that ships
// .agentd/snapshot/config (a filter for every file) and .gitattributes
// naming it runs nothing when the user's first prompt writes a file and
// a step's snapshot is taken, nor on later snapshots, diffs and
// restores; no git sees the server's environment.
func TestClonedOldStoreRunsNothing(t *testing.T) {
	t.Setenv(safegittest.SecretVar, "sk-secret")
	s := newStore(t, Options{})
	tr := safegittest.New(t)
	defer tr.Check(t)
	tr.WriteSide(t)
	ws := t.TempDir()
	plantOldStore(t, ws, tr)
	write(t, ws, ".gitattributes", tr.Attributes())
	write(t, ws, "a.txt", "one\n")
	write(t, ws, "doc.md", "# doc\n")
	ctx := t.Context()
	before, err := s.Track(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	write(t, ws, "a.txt", "two\n")
	write(t, ws, "doc.md", "# changed\n")
	after, err := s.Track(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	diffs, err := s.Diff(ctx, ws, before, after)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, d := range diffs {
		files = append(files, d.File)
	}
	if strings.Join(files, ",") != "a.txt,doc.md" {
		t.Errorf("diff files = %v (the old store is left out)", files)
	}
	if _, err := s.Restore(ctx, ws, before, files); err != nil {
		t.Fatal(err)
	}
	if read(t, ws, "a.txt") != "one\n" {
		t.Errorf("restored a.txt = %q", read(t, ws, "a.txt"))
	}
}

// TestModelWrittenStoreConfigRunsNothing: the model writes, with the
// default-allowed write tool, a filter into .agentd/snapshot/config (the
// store of before) and .gitattributes naming it, after a first snapshot:
// the step's closing snapshot runs nothing.
func TestModelWrittenStoreConfigRunsNothing(t *testing.T) {
	t.Setenv(safegittest.SecretVar, "sk-secret")
	s := newStore(t, Options{})
	tr := safegittest.New(t)
	defer tr.Check(t)
	ws := t.TempDir()
	write(t, ws, "a.txt", "one\n")
	if _, err := s.Track(t.Context(), ws); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(ws, OldDir, "config")
	if _, err := os.Stat(cfg); err == nil {
		f, _ := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
		f.WriteString(tr.Config())
		f.Close()
	} else {
		plantOldStore(t, ws, tr)
	}
	write(t, ws, ".gitattributes", tr.Attributes())
	write(t, ws, "a.txt", "two\n")
	if _, err := s.Track(t.Context(), ws); err != nil {
		t.Fatal(err)
	}
}

// TestStoreConfigTamperedIsRestored: what git reads in the store (its
// config, its attributes, a commondir pointing at another config) is
// changed between two snapshots, by whatever can write outside the
// workspace: the next use puts agentd's back before git runs, and the
// filters the changes named run nothing.
func TestStoreConfigTamperedIsRestored(t *testing.T) {
	t.Setenv(safegittest.SecretVar, "sk-secret")
	s := newStore(t, Options{})
	tr := safegittest.New(t)
	defer tr.Check(t)
	ws := t.TempDir()
	write(t, ws, "a.txt", "one\n")
	before, err := s.Track(t.Context(), ws)
	if err != nil {
		t.Fatal(err)
	}
	store := s.Dir(ws)
	f, err := os.OpenFile(filepath.Join(store, "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(tr.Config())
	f.Close()
	write(t, store, "info/attributes", tr.Attributes())
	other := t.TempDir()
	write(t, other, "config", "[core]\n\trepositoryformatversion = 0\n"+tr.Config())
	write(t, store, "commondir", other+"\n")
	write(t, ws, ".gitattributes", tr.Attributes())
	write(t, ws, "a.txt", "two\n")
	after, err := s.Track(t.Context(), ws)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Diff(t.Context(), ws, before, after); err != nil {
		t.Fatal(err)
	}
	if got := read(t, store, "config"); got != storeConfig() {
		t.Errorf("store config after a snapshot:\n%s", got)
	}
	if _, err := os.Stat(filepath.Join(store, "commondir")); !os.IsNotExist(err) {
		t.Errorf("commondir kept: %v", err)
	}
}

// TestProjectGitConfigReachesNoSnapshot: in a repository whose
// .git/config the model filled with commands, snapshots, diffs and
// restores run none of them.
func TestProjectGitConfigReachesNoSnapshot(t *testing.T) {
	t.Setenv(safegittest.SecretVar, "sk-secret")
	s := newStore(t, Options{})
	tr := safegittest.New(t)
	defer tr.Check(t)
	ws := t.TempDir()
	cmd := exec.Command("git", "init", "-q")
	cmd.Dir = ws
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	f, _ := os.OpenFile(filepath.Join(ws, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(tr.Config())
	f.Close()
	write(t, ws, ".git/info/attributes", tr.Attributes())
	write(t, ws, ".gitattributes", tr.Attributes())
	write(t, ws, "a.txt", "one\n")
	before, err := s.Track(t.Context(), ws)
	if err != nil {
		t.Fatal(err)
	}
	write(t, ws, "a.txt", "two\n")
	after, err := s.Track(t.Context(), ws)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Diff(t.Context(), ws, before, after); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Restore(t.Context(), ws, before, []string{"a.txt"}); err != nil {
		t.Fatal(err)
	}
}

// TestStoreOutsideWorkspace: a store is made under the store's folder,
// private to the user, and nothing is written into the workspace; a
// folder inside the workspace is refused.
func TestStoreOutsideWorkspace(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	s := newStore(t, Options{Dir: root})
	ws := t.TempDir()
	write(t, ws, "a.txt", "one\n")
	if _, err := s.Track(t.Context(), ws); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(ws); len(entries) != 1 {
		t.Errorf("the workspace holds %v", entries)
	}
	st, err := os.Stat(s.Dir(ws))
	if err != nil || filepath.Dir(s.Dir(ws)) != root || st.Mode().Perm() != 0o700 {
		t.Errorf("store %s: %v %v", s.Dir(ws), st, err)
	}
	inside := newStore(t, Options{Dir: filepath.Join(ws, "snap")})
	if _, err := inside.Track(t.Context(), ws); err == nil || !strings.Contains(err.Error(), "inside the workspace") {
		t.Errorf("a store inside the workspace: %v", err)
	}
}
