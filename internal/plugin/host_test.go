package plugin

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/testenv"
	"github.com/agentd/agentd/internal/tool"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// startHost starts a host running the named test plugins, from a plugin
// folder with test/plugins' node_modules linked in.
func startHost(t testing.TB, opts Options, files ...string) *Host {
	t.Helper()
	if !testenv.Plugins.Have() {
		if os.Getenv("AGENTD_PLUGINS_REQUIRED") != "" {
			t.Fatal("AGENTD_PLUGINS_REQUIRED is set and test/plugins has no Bun: npm install in test/plugins")
		}
		testenv.Skip(t, testenv.Plugins, "the host needs Bun")
	}
	dir := t.TempDir()
	mods, _ := filepath.Abs(testenv.PluginModules())
	if err := os.Symlink(mods, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, f)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		opts.Plugins = append(opts.Plugins, Spec{Spec: f, Path: p, Options: map[string]any{"log": filepath.Join(dir, "log")}})
	}
	opts.Dir = dir
	opts.Env = os.Environ()
	h := New(opts)
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Stop)
	return h
}

// TestStuckHookTimesOut: a hook that never answers fails its call with the
// reason once the timeout passes, and the host still answers the next
// call; a host that does not answer at all (its thread spinning) is
// killed and started again.
func TestStuckHookTimesOut(t *testing.T) {
	t.Parallel()
	h := startHost(t, Options{Timeout: 300 * time.Millisecond, Backoff: 10 * time.Millisecond}, "everyhook.js")
	dir := t.TempDir()
	call := &tool.Call{Directory: dir, SessionID: "ses_1", CallID: "c1", Input: []byte(`{}`)}
	start := time.Now()
	res := h.ToolBefore(context.Background(), "count", call)
	if res == nil || !res.IsError || !strings.Contains(res.Output, "no answer within 300ms") {
		t.Fatalf("a stuck hook: %+v", res)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the stuck hook held the call %s", d)
	}
	call = &tool.Call{Directory: dir, SessionID: "ses_1", CallID: "c2", Input: []byte(`{"text":"x"}`)}
	if res := h.ToolBefore(context.Background(), "echo", call); res != nil || string(call.Input) != `{"text":"x (before)"}` {
		t.Errorf("after a stuck hook: %+v %s", res, call.Input)
	}
	if h.Restarts() != 0 {
		t.Errorf("a host whose hook hung (but which answers) was restarted")
	}
}

// BenchmarkHookRoundTrip is one tool.execute.after through the host, with
// 4 KiB of output: the CPU of both processes per call.
func BenchmarkHookRoundTrip(b *testing.B) {
	h := startHost(b, Options{}, "twohooks.js")
	dir := b.TempDir()
	call := tool.Call{Directory: dir, SessionID: "ses_1", CallID: "c1", Input: []byte(`{"text":"x"}`)}
	out := strings.Repeat("x", 4096)
	ctx := context.Background()
	h.ToolAfter(ctx, "echo", call, &tool.Result{Output: out})
	pid := h.Pid()
	host0, self0 := procTicks(pid), selfCPU()
	for b.Loop() {
		res := tool.Result{Output: out}
		h.ToolAfter(ctx, "echo", call, &res)
		if res.Metadata["checked"] != true {
			b.Fatalf("the hook did not run: %+v", res.Metadata)
		}
	}
	b.ReportMetric(float64(procTicks(pid)-host0)*10/float64(b.N)*1000, "host-cpu-µs/op")
	b.ReportMetric(float64(selfCPU()-self0)/float64(b.N)/1e3, "server-cpu-µs/op")
}

func procTicks(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return ut + st
}

// selfCPU is this process's user and system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
