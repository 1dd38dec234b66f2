package builtin

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentd/agentd/internal/tool"
)

// Containing a tool's processes. A shell command can leave its process
// group (setsid, set -m) and so escape a kill of the group. Every process
// a call starts therefore carries a marker in its environment
// (AGENTD_TOOL=<scope>/<call>), inherited by all its descendants; and,
// where Linux lets agentd create cgroup v2 groups, it starts inside a
// cgroup of its own, which the kernel kills as a whole (cgroup.kill). The
// leader also dies with agentd (Pdeathsig), and at start-up agentd kills
// whatever a previous incarnation on the same database left behind
// (Sweep). The marker is the fallback when cgroups are not available;
// a command that scrubs its own environment can escape it, a cgroup it
// cannot leave.

// markerVar names the environment variable that marks a call's processes.
const markerVar = "AGENTD_TOOL"

// cgroupRoot is the cgroup v2 directory under which calls get groups, or
// "" when none can be used here.
var cgroupRoot = sync.OnceValue(func() string {
	for _, mnt := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		var st syscall.Statfs_t
		if syscall.Statfs(mnt, &st) != nil || st.Type != 0x63677270 { // CGROUP2_SUPER_MAGIC
			continue
		}
		dir := filepath.Join(mnt, "agentd")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
			continue // a kernel without cgroup.kill
		}
		// Creating a group proves it can be used.
		probe := filepath.Join(dir, fmt.Sprintf("probe-%d", os.Getpid()))
		if err := os.Mkdir(probe, 0o755); err != nil {
			continue
		}
		os.Remove(probe)
		return dir
	}
	return ""
})

// container holds the processes of one call.
type container struct {
	marker string
	group  string   // cgroup directory, "" without cgroups
	fd     *os.File // the group's directory, for starting inside it
}

// contain prepares a container for a call in scope (the database's).
func contain(scope, id string) *container {
	if scope == "" {
		scope = "none"
	}
	if id == "" {
		id = strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	c := &container{marker: scope + "/" + id}
	if root := cgroupRoot(); root != "" {
		g := filepath.Join(root, safeName(scope), safeName(id))
		if err := os.MkdirAll(g, 0o755); err == nil {
			if f, err := os.Open(g); err == nil {
				c.group, c.fd = g, f
			}
		}
	}
	return c
}

func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '.' || r == 0 {
			return '_'
		}
		return r
	}, s)
}

// env is the environment of the call's processes: the call's (scrubbed
// of secrets) and the marker.
func (c *container) env(e *tool.Env) []string { return append(e.Environ(), markerVar+"="+c.marker) }

// attr returns the process attributes that put the leader in the
// container: its own process group, in the cgroup, killed if agentd dies.
func (c *container) attr() *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if c.fd != nil {
		a.UseCgroupFD, a.CgroupFD = true, int(c.fd.Fd())
	}
	return a
}

// kill ends every process of the call, wherever it went.
func (c *container) kill() {
	if c.group != "" {
		_ = os.WriteFile(filepath.Join(c.group, "cgroup.kill"), []byte("1"), 0o644)
	}
	killMarked(func(v string) bool { return v == c.marker })
}

// close kills what is left and removes the cgroup.
func (c *container) close() {
	c.kill()
	if c.fd != nil {
		c.fd.Close()
	}
	if c.group != "" {
		// The kernel removes a group only once its processes are reaped.
		for range 50 {
			if err := os.Remove(c.group); err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// killMarked sends SIGKILL to every process whose marker satisfies match.
func killMarked(match func(string) bool) int {
	dir, err := os.Open("/proc")
	if err != nil {
		return 0
	}
	names, _ := dir.Readdirnames(-1)
	dir.Close()
	self := os.Getpid()
	n := 0
	// One buffer for every environment: this runs at every start over
	// every process of the machine.
	buf := make([]byte, 0, 32<<10)
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid == self {
			continue
		}
		if buf, err = readProcFile("/proc/"+name+"/environ", buf[:0]); err != nil {
			continue
		}
		if hasMarker(buf, match) && syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}

// hasMarker reports whether an environment (NUL-separated) holds a marker
// that satisfies match.
func hasMarker(env []byte, match func(string) bool) bool {
	prefix := []byte(markerVar + "=")
	for len(env) > 0 {
		kv := env
		if i := bytes.IndexByte(env, 0); i >= 0 {
			kv, env = env[:i], env[i+1:]
		} else {
			env = nil
		}
		if v, ok := bytes.CutPrefix(kv, prefix); ok && match(string(v)) {
			return true
		}
	}
	return false
}

// readProcFile appends the whole of a /proc file (whose size stat does
// not give) to buf. It reads through the system calls alone: an os.File
// would also try to register each file with the poller.
func readProcFile(path string, buf []byte) ([]byte, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return buf, err
	}
	defer syscall.Close(fd)
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, cap(buf))
		}
		n, err := syscall.Read(fd, buf[len(buf):cap(buf)])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return buf, err
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// Sweep kills the tool processes a previous agentd on the same database
// (scope) left behind when it died, and removes their cgroups. Call it at
// start-up, once this process owns the database.
func Sweep(scope string) int {
	if scope == "" {
		return 0
	}
	n := killMarked(func(v string) bool { return strings.HasPrefix(v, scope+"/") })
	if root := cgroupRoot(); root != "" {
		dir := filepath.Join(root, safeName(scope))
		groups, _ := os.ReadDir(dir)
		for _, g := range groups {
			if g.IsDir() {
				p := filepath.Join(dir, g.Name())
				_ = os.WriteFile(filepath.Join(p, "cgroup.kill"), []byte("1"), 0o644)
				time.Sleep(10 * time.Millisecond)
				_ = os.Remove(p)
			}
		}
	}
	return n
}
