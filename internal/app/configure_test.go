package app_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/config"
)

func TestEventRetentionConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		json    string
		age     time.Duration
		count   int
		wantErr bool
	}{
		{json: `{}`},
		{json: `{"agentd":{"events":{"maxAge":"2h","maxCount":5000}}}`, age: 2 * time.Hour, count: 5000},
		{json: `{"agentd":{"events":{"maxAge":"soon"}}}`, wantErr: true},
		{json: `{"agentd":{"events":{"maxCount":-1}}}`, wantErr: true},
	} {
		var f config.File
		if err := json.Unmarshal([]byte(tc.json), &f); err != nil {
			t.Fatal(err)
		}
		var c app.Config
		err := c.Apply(f, t.TempDir())
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: err = %v", tc.json, err)
			continue
		}
		if !tc.wantErr && (c.EventMaxAge != tc.age || c.EventMaxCount != tc.count) {
			t.Errorf("%s: retention %v / %d", tc.json, c.EventMaxAge, c.EventMaxCount)
		}
	}
}

func TestWebfetchAllowConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		json    string
		want    []string
		wantErr bool
	}{
		{json: `{}`},
		{json: `{"agentd":{"webfetch":{"allow":["127.0.0.1","10.1.2.3/16","::1"]}}}`, want: []string{"127.0.0.1/32", "10.1.0.0/16", "::1/128"}},
		{json: `{"agentd":{"webfetch":{"allow":["intranet"]}}}`, wantErr: true},
	} {
		var f config.File
		if err := json.Unmarshal([]byte(tc.json), &f); err != nil {
			t.Fatal(err)
		}
		var c app.Config
		err := c.Apply(f, t.TempDir())
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: err = %v", tc.json, err)
			continue
		}
		var got []string
		for _, p := range c.WebFetchAllow {
			got = append(got, p.String())
		}
		if !tc.wantErr && strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: allow %v, want %v", tc.json, got, tc.want)
		}
	}
}

// TestSnapshotDirConfig: agentd.snapshot.dir places the snapshot stores
// (an absolute path only), and a node's stores land there.
func TestSnapshotDirConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		json, dir string
		wantErr   bool
	}{
		{json: `{}`},
		{json: `{"agentd":{"snapshot":{"dir":"/srv/shared/snapshots/"}}}`, dir: "/srv/shared/snapshots"},
		{json: `{"agentd":{"snapshot":{"dir":"snapshots"}}}`, wantErr: true},
	} {
		f, err := config.Parse([]byte(tc.json))
		if err != nil {
			t.Fatal(err)
		}
		var c app.Config
		err = c.Apply(f, t.TempDir())
		if (err != nil) != tc.wantErr || !tc.wantErr && c.Snapshot.Dir != tc.dir {
			t.Errorf("%s: dir %q, err %v", tc.json, c.Snapshot.Dir, err)
		}
	}
	shared := t.TempDir()
	n := startNode(t, func(c *app.Config) { c.Snapshot.Dir = shared })
	sid := n.session()
	n.send(sid, bash("echo x > f.txt"))
	if entries, err := os.ReadDir(shared); err != nil || len(entries) != 1 {
		t.Errorf("stores in the configured folder: %v %v", entries, err)
	}
}

// TestMCPAddConfig: agentd.mcp.add reaches the node's settings.
func TestMCPAddConfig(t *testing.T) {
	t.Parallel()
	for js, want := range map[string]string{`{}`: "", `{"agentd":{"mcp":{"add":"remote"}}}`: "remote"} {
		var f config.File
		if err := json.Unmarshal([]byte(js), &f); err != nil {
			t.Fatal(err)
		}
		var c app.Config
		if err := c.Apply(f, t.TempDir()); err != nil || c.MCPAdd != want {
			t.Errorf("%s: MCPAdd %q, %v; want %q", js, c.MCPAdd, err, want)
		}
	}
}
