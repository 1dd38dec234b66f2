// Package testenv skips the tests whose part of the environment is
// missing (a PostgreSQL server, a browser, opencode's CLI, the long
// torture runs) and makes the skip visible: `go test ./...` shows only
// "ok" for a package whose tests skipped, so the first skip of a go test
// invocation prints one line on go test's own output naming everything
// this machine skips and how to run it.
package testenv

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Need is a part of the environment some tests need.
type Need struct {
	// Name says what is missing, How how to provide it.
	Name, How string
	// Have reports whether this machine has it.
	Have func() bool
}

// The optional parts of the environment.
var (
	Postgres = Need{"PostgreSQL", "set AGENTD_TEST_POSTGRES to what scripts/postgres.sh start DIR prints",
		func() bool { return os.Getenv("AGENTD_TEST_POSTGRES") != "" }}
	Browser = Need{"a browser", "install chromium",
		func() bool { return lookPath("chromium", "chromium-browser", "google-chrome") }}
	Opencode = Need{"opencode's CLI", "npm install in test/compat, or set AGENTD_OPENCODE", haveOpencode}
	Tmux     = Need{"tmux", "install tmux", func() bool { return lookPath("tmux") }}
	Torture  = Need{"the torture runs", "set AGENTD_TORTURE=1",
		func() bool { return os.Getenv("AGENTD_TORTURE") == "1" }}
	Tools = Need{"curl and jq", "install curl and jq", func() bool { return lookPath("curl") && lookPath("jq") }}
	// Plugins is Bun and the published opencode plugins test/plugins
	// installs (from the npm registry).
	Plugins = Need{"Bun and the test plugins", "npm install in test/plugins",
		func() bool { _, err := os.Stat(filepath.Join(PluginModules(), ".bin", "bun")); return err == nil }}
)

// PluginModules is test/plugins' node_modules: Bun, opencode's plugin
// package and SDK, and the published plugins the tests run.
func PluginModules() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "test", "plugins", "node_modules")
}

// Landlock is the kernel's Landlock at ABI version abi or later: the
// sandbox's file rules need 1 (Linux 5.13), its network rules 4 (6.7),
// its signal and socket scopes 6 (6.12).
func Landlock(abi int) Need {
	kernel := map[int]string{1: "5.13", 2: "5.19", 3: "6.2", 4: "6.7", 5: "6.10", 6: "6.12", 7: "6.15"}[abi]
	return Need{fmt.Sprintf("Landlock ABI %d", abi),
		fmt.Sprintf("run on Linux %s or later with landlock among the LSMs (lsm=…,landlock)", kernel),
		func() bool { return landlockABI() >= abi }}
}

// all lists the needs the summary line names.
var all = []Need{Postgres, Browser, Opencode, Tmux, Tools, Torture, Plugins, Landlock(6)}

// Skip skips the test for want of n, and names what this machine skips
// once per go test invocation.
func Skip(t testing.TB, n Need, why string) {
	t.Helper()
	Announce()
	t.Skip(why + " (" + n.How + "; .ci/run provides everything)")
}

func lookPath(names ...string) bool {
	for _, n := range names {
		for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
			if st, err := os.Stat(filepath.Join(dir, n)); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
				return true
			}
		}
	}
	return false
}

// OpencodeBinary returns opencode's executable: AGENTD_OPENCODE, or the
// one test/compat's lock file installs; "" when there is none.
func OpencodeBinary() string {
	if p := os.Getenv("AGENTD_OPENCODE"); p != "" {
		return p
	}
	_, file, _, _ := runtime.Caller(0)
	nm := filepath.Join(filepath.Dir(file), "..", "..", "test", "compat", "node_modules")
	for _, p := range []string{
		filepath.Join(nm, "opencode-linux-x64", "bin", "opencode"),
		filepath.Join(nm, "opencode-linux-x64-baseline", "bin", "opencode"),
		filepath.Join(nm, "opencode-linux-arm64", "bin", "opencode"),
		filepath.Join(nm, "opencode-darwin-arm64", "bin", "opencode"),
	} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

func haveOpencode() bool { return OpencodeBinary() != "" }

var once sync.Once

// Announce prints the summary line on go test's output, once per go test
// invocation however many packages skip: go test hides a passing
// package's output, so the line goes to the go command's own stderr.
func Announce() {
	once.Do(func() {
		if testing.Verbose() {
			return // -v shows every skip with its reason
		}
		var missing []string
		for _, n := range all {
			if !n.Have() {
				missing = append(missing, n.Name+": "+n.How)
			}
		}
		if len(missing) == 0 {
			return
		}
		line := "agentd: tests skipped for want of " + strings.Join(missing, "; ") +
			". .ci/run provides all of it (go test -v lists each skip).\n"
		out, ok := goStderr()
		if !ok {
			return
		}
		defer out.Close()
		fmt.Fprint(out, line)
	})
}

// goStderr opens the go command's standard error, the first time any test
// binary of that go command asks. It reports false when this process was
// not started by go test (or on a system without /proc).
func goStderr() (*os.File, bool) {
	ppid := os.Getppid()
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", ppid))
	if err != nil || strings.TrimSpace(string(comm)) != "go" {
		return nil, false
	}
	// The go command's start time tells its invocations apart (a pid is
	// reused).
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", ppid))
	if err != nil {
		return nil, false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	if len(fields) < 20 {
		return nil, false
	}
	marker := filepath.Join(os.TempDir(), "agentd-test-skips-"+strconv.Itoa(ppid)+"-"+fields[19])
	f, err := os.OpenFile(marker, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, false // another package of this go test printed it
	}
	f.Close()
	sweep()
	out, err := os.OpenFile(fmt.Sprintf("/proc/%d/fd/2", ppid), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil, false
	}
	return out, true
}

// sweep removes the markers of go test invocations older than a day.
func sweep() {
	old, _ := filepath.Glob(filepath.Join(os.TempDir(), "agentd-test-skips-*"))
	for _, p := range old {
		if st, err := os.Stat(p); err == nil && time.Since(st.ModTime()) > 24*time.Hour {
			os.Remove(p)
		}
	}
}

// SkipShort skips an end-to-end test (real binaries, browsers, opencode)
// under go test -short, which keeps the unit and in-process tests.
func SkipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: skipped under -short")
	}
}

// MainSkippingShort is a TestMain for packages that are end-to-end
// throughout: under -short it runs nothing.
func MainSkippingShort(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("end-to-end: skipped under -short")
		os.Exit(0)
	}
	os.Exit(m.Run())
}
