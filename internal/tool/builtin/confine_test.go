package builtin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/sandbox"
	"github.com/agentd/agentd/internal/testenv"
	"github.com/agentd/agentd/internal/tool"
)

// confined is a sandbox for the tests, skipping them where the kernel has
// none.
func confined(t *testing.T, cfg sandbox.Config) *sandbox.Sandbox {
	t.Helper()
	if sandbox.ABI() < 1 {
		testenv.Skip(t, testenv.Landlock(1), "needs Landlock")
	}
	s, err := sandbox.New(cfg)
	if err != nil || s == nil {
		t.Fatalf("sandbox: %v", err)
	}
	return s
}

func bashCall(ctx context.Context, t *testing.T, call tool.Call, command string) tool.Result {
	t.Helper()
	call.Input, _ = json.Marshal(map[string]any{"command": command})
	res, err := Bash{}.Run(ctx, call)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestBashConfined: a confined bash call writes only in its workspace
// (whatever the way out), and outside it only where the call was granted
// external_directory; it runs in its cgroup and process group.
func TestBashConfined(t *testing.T) {
	t.Parallel()
	s := confined(t, sandbox.Config{})
	ws, out := workspace(t), workspace(t)
	call := tool.Call{Directory: ws, Sandbox: s, Scope: "confined-test", ID: "c1"}
	res := bashCall(t.Context(), t, call, `touch in.txt; touch `+out+`/abs; (cd `+out+` && touch cd); ln -s `+out+` l && touch l/sym
		read -a st < /proc/$$/stat; echo "pid=$$ pgrp=${st[4]}"; cat /proc/self/cgroup; true`)
	for _, f := range []string{"abs", "cd", "sym"} {
		if _, err := os.Stat(filepath.Join(out, f)); err == nil {
			t.Errorf("the call wrote %s outside its workspace", f)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "in.txt")); err != nil {
		t.Errorf("the call could not write its workspace: %s", res.Output)
	}
	if pid, pgrp, _ := strings.Cut(strings.Split(res.Output, "pid=")[1], " pgrp="); !strings.HasPrefix(pgrp, pid+"\n") {
		t.Errorf("the shell is not its own process group's leader: %s", res.Output)
	}
	if cgroupRoot() != "" && !strings.Contains(res.Output, "/agentd/confined-test/c1\n") {
		t.Errorf("the shell is not in its call's cgroup: %s", res.Output)
	}

	// external_directory granted: the directories the command names are
	// writable for this call only.
	call.ID, call.AllowExternal = "c2", true
	bashCall(t.Context(), t, call, "touch "+out+"/granted")
	if _, err := os.Stat(filepath.Join(out, "granted")); err != nil {
		t.Errorf("a granted directory was not writable: %v", err)
	}
	call.ID, call.AllowExternal = "c3", false
	bashCall(t.Context(), t, call, "touch "+out+"/again")
	if _, err := os.Stat(filepath.Join(out, "again")); err == nil {
		t.Error("a grant outlived its call")
	}
}

// TestBashConfinedAbort: an abort still ends a confined call's whole
// process group, and the children that left it, within a second.
func TestBashConfinedAbort(t *testing.T) {
	t.Parallel()
	s := confined(t, sandbox.Config{})
	ws := workspace(t)
	ctx, cancel := context.WithCancel(t.Context())
	cmd := `(trap '' TERM; sleep 600) & echo $! > stubborn.pid; setsid sh -c 'trap "" TERM; echo $$ > escaped.pid; sleep 600' & sleep 600`
	done := make(chan tool.Result, 1)
	go func() {
		done <- bashCall(ctx, t, tool.Call{Directory: ws, Sandbox: s, Scope: "confined-abort", ID: "a1"}, cmd)
	}()
	pids := waitPIDs(t, ws, "stubborn.pid", "escaped.pid")
	start := time.Now()
	cancel()
	res := <-done
	if d := time.Since(start); d > time.Second {
		t.Errorf("abort took %v", d)
	}
	if !res.IsError || !strings.Contains(res.Output, "aborted") {
		t.Errorf("aborted result = %+v", res)
	}
	for _, pid := range pids {
		for alive(pid) && time.Since(start) < time.Second {
			time.Sleep(5 * time.Millisecond)
		}
		if alive(pid) {
			t.Errorf("process %d survived the abort", pid)
		}
	}
	if n := marked("confined-abort/a1"); n != 0 {
		t.Errorf("%d processes outlived the abort", n)
	}
}

// TestGrepConfined: ripgrep runs confined and still finds what the
// workspace holds.
func TestGrepConfined(t *testing.T) {
	t.Parallel()
	s := confined(t, sandbox.Config{})
	ws := workspace(t)
	if err := os.WriteFile(filepath.Join(ws, "a.go"), []byte("package a\n// needle here\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"pattern": "needle"})
	res, err := Grep{}.Run(t.Context(), tool.Call{Directory: ws, Input: b, Sandbox: s})
	if err != nil || !strings.Contains(res.Output, "a.go") {
		t.Errorf("grep = %+v, %v", res, err)
	}
}

// TestBashKeepsHeadAndTail: a long output keeps its beginning and its end
// (where a build says what failed), and says how much was cut between.
func TestBashKeepsHeadAndTail(t *testing.T) {
	t.Parallel()
	ws := workspace(t)
	res := run(t, Bash{}, ws, map[string]any{"command": `echo HEAD; head -c 12000000 /dev/zero | tr '\0' x; echo; echo TAIL`})
	cut := int64(5+12000001+5) - bashOutputCap
	if !strings.HasPrefix(res.Output, "HEAD\n") || !strings.HasSuffix(res.Output, "TAIL\n") ||
		!strings.Contains(res.Output, "\n… "+strconv.FormatInt(cut, 10)+" bytes of output cut here …\n") {
		t.Errorf("output: %q … %q", res.Output[:min(len(res.Output), 40)], res.Output[max(len(res.Output)-80, 0):])
	}
	if len(res.Output) > bashOutputCap+100 || res.Metadata["truncated"] != true {
		t.Errorf("output of %d bytes, truncated %v", len(res.Output), res.Metadata["truncated"])
	}
	if md, _ := res.Metadata["output"].(string); !strings.HasSuffix(md, "TAIL\n") || len(md) > metadataOutput+10 {
		t.Errorf("metadata output ends %q (%d bytes)", md[max(len(md)-20, 0):], len(md))
	}
}

// TestCappedKeepsHeadAndTail: whatever the sizes of the writes, what is
// kept is the first and the last bytes of what was written.
func TestCappedKeepsHeadAndTail(t *testing.T) {
	t.Parallel()
	for _, sizes := range [][]int{{1}, {3, 4, 5}, {10, 1, 1, 1, 30, 2}, {7, 7, 7, 7, 7, 7, 7}, {100}, {6, 13, 2, 9, 1, 40, 3}} {
		c := newCapped(10, 16)
		var all []byte
		n := byte(0)
		for _, size := range sizes {
			p := make([]byte, size)
			for i := range p {
				p[i] = 'a' + n%26
				n++
			}
			all = append(all, p...)
			c.Write(p)
		}
		want := string(all)
		if len(all) > 26 {
			want = string(all[:10]) + "\n… " + strconv.Itoa(len(all)-26) + " bytes of output cut here …\n" + string(all[len(all)-16:])
		}
		if got := c.String(); got != want {
			t.Errorf("writes %v: kept %q, want %q", sizes, got, want)
		}
		if got, w := c.last(5), string(all[max(len(all)-5, 0):]); got != w {
			t.Errorf("writes %v: last(5) = %q, want %q", sizes, got, w)
		}
	}
}
