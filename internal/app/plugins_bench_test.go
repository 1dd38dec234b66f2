package app_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/app"
)

// BenchmarkPluginTurn is a three-step tool turn (two echo calls, then the
// answer) through the HTTP API without plugins and with a plugin whose
// before and after hooks see every call: the CPU a turn costs (the
// server's and the host's), its p50, the host's memory and the node's
// start-up time.
func BenchmarkPluginTurn(b *testing.B) {
	for _, mode := range []string{"none", "two-hooks"} {
		b.Run(mode, func(b *testing.B) {
			cfg := app.Config{DBPath: filepath.Join(b.TempDir(), "a.db"), Host: "127.0.0.1", Version: "bench",
				Directory: b.TempDir(), Logger: quietLogger(), Heartbeat: time.Hour, Tools: testTools(nil)}
			if mode != "none" {
				dir, specs := pluginFolder(b, "twohooks.js")
				cfg.Plugins.Specs, cfg.Plugins.Dir = specs, dir
			}
			start := time.Now()
			a, err := app.Start(context.Background(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			startup := time.Since(start)
			defer a.Stop(context.Background())
			c := client.New(a.URL())
			s, _ := c.CreateSession(context.Background(), "", "")
			prompt := client.Prompt{Text: `tool:echo:{"text":"one"}` + "\n" + `tool:echo:{"text":"two"}` + "\nreply:done"}
			if _, err := c.Send(context.Background(), s.ID, prompt); err != nil { // warm: the instance is made
				b.Fatal(err)
			}
			pid := measureTurns(b, a, c, s.ID, prompt)
			b.ReportMetric(float64(startup)/1e6, "startup-ms")
			if pid != 0 {
				b.ReportMetric(float64(rssKiB(pid))/1024, "host-rss-MiB")
			}
		})
	}
}

// measureTurns sends prompt to the session once per iteration and reports
// the server's and the plugin host's CPU per turn and the p50; it returns
// the host's pid (0 without one).
func measureTurns(b *testing.B, a *app.App, c *client.Client, sid string, prompt client.Prompt) int {
	pid := 0
	if h := a.PluginHost(); h != nil {
		pid = h.Pid()
	}
	cpu0, host0 := selfCPU(), procCPU(pid)
	var took []time.Duration
	for b.Loop() {
		t := time.Now()
		if _, err := c.Send(context.Background(), sid, prompt); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(t))
	}
	slices.Sort(took)
	n := float64(len(took))
	b.ReportMetric(float64(selfCPU()-cpu0)/n/1e6, "server-cpu-ms/turn")
	b.ReportMetric(float64(procCPU(pid)-host0)/n/1e6, "host-cpu-ms/turn")
	b.ReportMetric(float64(took[len(took)/2])/1e6, "p50-ms")
	return pid
}

// selfCPU is this process's user and system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is a process's user and system CPU time (/proc/PID/stat), 0
// for pid 0.
func procCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}

// rssKiB is a process's resident memory.
func rssKiB(pid int) int64 {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
