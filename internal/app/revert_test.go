package app_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// userIDs lists the session's user messages, oldest first.
func userIDs(t *testing.T, n *node, sid string) []string {
	t.Helper()
	var ids []string
	for _, m := range mustMessages(t, n, sid) {
		if m.Info.Role == core.RoleUser {
			ids = append(ids, m.Info.ID)
		}
	}
	return ids
}

// TestRevertLeavesUntrackedFiles: a revert deletes only files the
// snapshots prove a step made. A user's ignored log, which a step's
// rewrite of .gitignore made look created by the step, and a file grown
// past the snapshot size limit survive; the revert point says which files
// it left and why; the rest is reverted.
func TestRevertLeavesUntrackedFiles(t *testing.T) {
	t.Parallel()
	n := startNode(t, func(c *app.Config) { c.Snapshot.MaxFileBytes = 1000 })
	dir := n.cfg.Directory
	os.WriteFile(filepath.Join(dir, ".gitignore"), []byte("*.log\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "user.log"), []byte("the user's own log\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "f.txt"), []byte("v1\n"), 0o644)
	sid := n.session()
	n.send(sid, bash("printf '# nothing ignored\\n' > .gitignore; echo v2 > f.txt; echo small > grow.bin"))
	n.send(sid, bash("head -c 5000 /dev/zero > grow.bin"))
	s, err := n.c.Revert(t.Context(), sid, userIDs(t, n, sid)[0], "")
	if err != nil {
		t.Fatal(err)
	}
	if readFile(t, dir, "user.log") != "the user's own log\n" {
		t.Error("the revert deleted the user's ignored file")
	}
	if fi, err := os.Stat(filepath.Join(dir, "grow.bin")); err != nil || fi.Size() != 5000 {
		t.Errorf("the revert touched a file over the size limit: %v %v", fi, err)
	}
	if readFile(t, dir, ".gitignore") != "*.log\n" || readFile(t, dir, "f.txt") != "v1\n" {
		t.Errorf("not reverted: .gitignore %q, f.txt %q", readFile(t, dir, ".gitignore"), readFile(t, dir, "f.txt"))
	}
	kept := map[string]bool{}
	if s.Revert != nil {
		for _, k := range s.Revert.Kept {
			kept[k.Path] = k.Reason != ""
		}
	}
	if !kept["user.log"] || !kept["grow.bin"] {
		t.Errorf("the revert point does not say which files it left: %+v", s.Revert)
	}
}

// TestRevertThroughSymlinkRefused: a revert whose file lies under a folder
// that became a symbolic link out of the workspace is refused with a 4xx
// that says why; nothing is changed, outside or in.
func TestRevertThroughSymlinkRefused(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	dir := n.cfg.Directory
	os.MkdirAll(filepath.Join(dir, "d"), 0o755)
	os.WriteFile(filepath.Join(dir, "d", "f.txt"), []byte("v1\n"), 0o644)
	sid := n.session()
	n.send(sid, bash("echo v2 > d/f.txt; echo v2 > g.txt"))
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "f.txt"), []byte("precious\n"), 0o644)
	os.RemoveAll(filepath.Join(dir, "d"))
	if err := os.Symlink(outside, filepath.Join(dir, "d")); err != nil {
		t.Fatal(err)
	}
	_, err := n.c.Revert(t.Context(), sid, userIDs(t, n, sid)[0], "")
	var ce *client.Error
	if !errors.As(err, &ce) || ce.StatusCode != 409 || !strings.Contains(ce.Message, "symbolic link") {
		t.Fatalf("revert through a symlinked folder: %v", err)
	}
	if readFile(t, outside, "f.txt") != "precious\n" || readFile(t, dir, "g.txt") != "v2\n" {
		t.Error("a refused revert changed files")
	}
	if s, _ := n.c.Session(t.Context(), sid); s.Revert != nil {
		t.Errorf("a refused revert set the revert point: %+v", s.Revert)
	}
}

// TestBusyWhileReverting: while a revert of a session's files is in
// progress (its journal in the store), the session's other writers are
// refused with 409 SessionBusyError: a prompt, another revert, an
// unrevert; once it has ended they go through.
func TestBusyWhileReverting(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	ctx := t.Context()
	sid := n.session()
	n.send(sid, bash("echo v2 > f.txt"))
	users := userIDs(t, n, sid)
	rec := store.RevertJournal{SessionID: sid, ID: "rvt_test", Owner: "elsewhere", Expires: time.Now().Add(time.Hour).UnixMilli(), Data: []byte(`{}`)}
	if err := n.app.Store.Tx(ctx, func(tx store.Tx) error { return tx.PutRevertJournal(ctx, rec) }); err != nil {
		t.Fatal(err)
	}
	var ce *client.Error
	busy := func(what string, err error) {
		t.Helper()
		if !errors.As(err, &ce) || ce.StatusCode != 409 || ce.Name != "SessionBusyError" || !strings.Contains(ce.Message, "revert") {
			t.Errorf("%s while a revert is in progress: %v", what, err)
		}
	}
	busy("prompt", n.c.SendAsync(ctx, sid, client.Prompt{Text: "reply:hi"}))
	_, err := n.c.Revert(ctx, sid, users[0], "")
	busy("revert", err)
	_, err = n.c.Unrevert(ctx, sid)
	busy("unrevert", err)
	if err := n.app.Store.Tx(ctx, func(tx store.Tx) error { return tx.DeleteRevertJournal(ctx, sid, rec.ID) }); err != nil {
		t.Fatal(err)
	}
	n.send(sid, "reply:after the revert")
}

// gitWrapper runs the calling test in a child of the test binary (git is
// looked up once per process) whose PATH finds first a git that, once
// armed, holds the first cat-file or the second checkout (a file restore
// of the revert under way) until released; held reports whether a command
// is held. It returns ok false in the parent, whose work is then done.
func gitWrapper(t *testing.T) (ok bool, arm func(), held func() bool, release func()) {
	t.Helper()
	ctl := os.Getenv("AGENTD_TEST_GIT_CTL")
	if ctl == "" {
		real, err := exec.LookPath("git")
		if err != nil {
			t.Skip("git is not installed")
		}
		bin, ctl := t.TempDir(), t.TempDir()
		script := `#!/bin/sh
sub=""; skip=0
for a in "$@"; do
  if [ $skip = 1 ]; then skip=0; continue; fi
  case "$a" in -c) skip=1;; -*) ;; *) sub=$a; break;; esac
done
if [ -e "` + ctl + `/arm" ] && { [ "$sub" = checkout ] || [ "$sub" = cat-file ]; }; then
  n=$(cat "` + ctl + `/count" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "` + ctl + `/count"
  if [ "$sub" = cat-file ] && [ $n = 1 ] || [ $n = 2 ]; then
    touch "` + ctl + `/held"
    while [ ! -e "` + ctl + `/release" ]; do sleep 0.02; done
  fi
fi
exec "` + real + `" "$@"
`
		if err := os.WriteFile(filepath.Join(bin, "git"), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "AGENTD_TEST_GIT_CTL="+ctl)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v:\n%s", err, out)
		}
		if _, err := os.Stat(filepath.Join(ctl, "held")); err != nil {
			t.Errorf("no git of the revert was held:\n%s", out)
		}
		return false, nil, nil, nil
	}
	release = func() { os.WriteFile(filepath.Join(ctl, "release"), nil, 0o644) }
	t.Cleanup(release)
	held = func() bool { _, err := os.Stat(filepath.Join(ctl, "held")); return err == nil }
	return true, func() { os.WriteFile(filepath.Join(ctl, "arm"), nil, 0o644) }, held, release
}

// TestRevertOutlivesItsRequest: a client that gives up while its revert
// is restoring files does not leave the workspace half reverted: the
// revert goes on detached, ends whole with its revert point written, and
// the next snapshot works.
func TestRevertOutlivesItsRequest(t *testing.T) {
	t.Parallel()
	ok, arm, held, release := gitWrapper(t)
	if !ok {
		return
	}
	n := startNode(t)
	dir := n.cfg.Directory
	for _, f := range []string{"a.txt", "b.txt", "c.txt"} {
		os.WriteFile(filepath.Join(dir, f), []byte("v1\n"), 0o644)
	}
	sid := n.session()
	n.send(sid, bash("echo v2 > a.txt; echo v2 > b.txt; echo v2 > c.txt; echo new > d.txt"))
	users := userIDs(t, n, sid)
	arm()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { _, err := n.c.Revert(ctx, sid, users[0], ""); done <- err }()
	// The wrapper is another process: its mark is polled.
	for waiting := true; waiting; {
		select {
		case err := <-done:
			t.Logf("the revert answered before a command was held: %v", err)
			waiting = false
		case <-time.After(5 * time.Millisecond):
			if held() {
				cancel()
				<-done
				waiting = false
			}
		}
	}
	release()
	cancel()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err := n.c.Session(t.Context(), sid)
		if err == nil && s.Revert != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the revert point was never written (files a=%q b=%q c=%q d=%q)", readFile(t, dir, "a.txt"),
				readFile(t, dir, "b.txt"), readFile(t, dir, "c.txt"), readFile(t, dir, "d.txt"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, f := range []string{"a.txt", "b.txt", "c.txt"} {
		if got := readFile(t, dir, f); got != "v1\n" {
			t.Errorf("%s = %q after the revert", f, got)
		}
	}
	if readFile(t, dir, "d.txt") != "<missing>" {
		t.Error("d.txt, made by the reverted step, is still there")
	}
	n.send(sid, bash("echo v3 > a.txt"))
	var last *core.Part
	for _, m := range mustMessages(t, n, sid) {
		if p := partOf(m, core.PartPatch); p != nil {
			last = p
		}
	}
	if last == nil || strings.Join(last.Files, ",") != "a.txt" {
		t.Errorf("the next step's patch: %+v", last)
	}
}
