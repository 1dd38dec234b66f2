package app_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/core"
)

// TestDiffWithholdsDeniedAndNamesSpaces: GET /session/{id}/diff gives a
// file the operator's rules deny to read without its content (name,
// status and counts only), as the session.diff summary does, and names a
// file with a space as it is (git ends such names with a tab in its
// headers).
func TestDiffWithholdsDeniedAndNamesSpaces(t *testing.T) {
	t.Parallel()
	n := startNode(t, func(c *app.Config) {
		c.Engine.Permission = append(c.Engine.Permission, core.Rule{Permission: "read", Pattern: "*.env", Action: core.ActionDeny})
	})
	dir := n.cfg.Directory
	os.WriteFile(filepath.Join(dir, "keep.txt"), []byte("v1\n"), 0o644)
	sid := n.session()
	n.send(sid, bash("echo TOKEN=sk-live-123 > prod.env; echo hi > 'name with space.txt'; echo v2 > keep.txt"))
	diff, err := n.c.Diff(t.Context(), sid, "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, d := range diff {
		got[d.File] = d.Patch
		if d.File == "prod.env" && (d.Status != "added" || d.Additions != 1) {
			t.Errorf("prod.env: %+v", d)
		}
	}
	if p, ok := got["prod.env"]; !ok || strings.Contains(p, "sk-live") {
		t.Errorf("the denied file: present %v, patch %q", ok, p)
	}
	if p, ok := got["name with space.txt"]; !ok || !strings.Contains(p, "+hi") {
		t.Errorf("files %v (want %q with its patch)", keys(got), "name with space.txt")
	}
	if !strings.Contains(got["keep.txt"], "+v2") {
		t.Errorf("keep.txt patch %q", got["keep.txt"])
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestDiffOfALostSnapshot: snapshots the store no longer holds (taken in
// the workspace's store before the upgrade, or removed) answer 410
// SnapshotGoneError, and later steps are recorded again.
func TestDiffOfALostSnapshot(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	sid := n.session()
	n.send(sid, bash("echo one > f.txt"))
	if err := os.RemoveAll(n.cfg.DBPath + ".snapshot"); err != nil {
		t.Fatal(err)
	}
	_, err := n.c.Diff(t.Context(), sid, "")
	if err == nil || !strings.Contains(err.Error(), "410") || !strings.Contains(err.Error(), "no longer in the store") {
		t.Errorf("diff of lost snapshots: %v", err)
	}
	users := 0
	var last string
	n.send(sid, bash("echo two > f.txt"))
	for _, m := range mustMessages(t, n, sid) {
		if m.Info.Role == core.RoleUser {
			users++
			last = m.Info.ID
		}
	}
	d, err := n.c.Diff(t.Context(), sid, last)
	if err != nil || users != 2 || len(d) != 1 || !strings.Contains(d[0].Patch, "+two") {
		t.Errorf("the next turn's diff: %+v %v", d, err)
	}
}
