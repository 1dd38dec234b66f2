package builtin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
)

// Reaper ends a database's tool processes once the server that started
// them is gone, killed with SIGKILL included: a command that left its
// process group and scrubbed its marker would otherwise outlive the server
// until the next one swept at start. It is a small shell process that
// waits for the end of a pipe only the server holds, then kills what
// carries the scope's marker and every cgroup of the scope, and removes
// the scope's cgroup directory. It also holds the files it is given (the
// database's lock) until it has swept, so that no new server on the same
// database starts tools before the old ones are gone.
type Reaper struct {
	cmd  *exec.Cmd
	w    *os.File
	once sync.Once
	err  error
}

// reaperScript sweeps scope ($1) and its cgroup directory ($2) once its
// standard input ends.
const reaperScript = `trap '' INT TERM HUP
while read -r _; do :; done
for e in $(grep -l -s -a -z "^AGENTD_TOOL=$1/" /proc/[0-9]*/environ); do
	p=${e#/proc/}; kill -9 "${p%/environ}" 2>/dev/null
done
if [ -n "$2" ] && [ -d "$2" ]; then
	for g in "$2"/*/; do [ -f "$g/cgroup.kill" ] && echo 1 >"$g/cgroup.kill" 2>/dev/null; done
	for g in "$2"/*/; do
		# A killed group is removable only once the kernel has reaped its
		# processes: wait (at most ~5 s) for it to say it is empty.
		n=0
		while [ $n -lt 500 ] && grep -qs '^populated 1' "$g/cgroup.events"; do sleep 0.01; n=$((n+1)); done
		[ -d "$g" ] && rmdir "$g" 2>/dev/null
	done
	rmdir "$2" 2>/dev/null
fi
exit 0
`

// StartReaper starts the reaper of scope, holding keep open until it has
// swept.
func StartReaper(scope string, keep ...*os.File) (*Reaper, error) {
	if scope == "" {
		return &Reaper{}, nil
	}
	groups := ""
	if root := cgroupRoot(); root != "" {
		groups = filepath.Join(root, safeName(scope))
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start the tool reaper: %w", err)
	}
	cmd := exec.Command("/bin/sh", "-c", reaperScript, "agentd-reaper", scope, groups)
	cmd.Stdin = r
	cmd.ExtraFiles = keep
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	// Its own process group: a ^C meant for the server does not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("start the tool reaper: %w", err)
	}
	return &Reaper{cmd: cmd, w: w}, nil
}

// Stop lets the reaper sweep and waits for it. It is idempotent.
func (r *Reaper) Stop() error {
	if r == nil || r.cmd == nil {
		return nil
	}
	r.once.Do(func() {
		r.w.Close()
		if err := r.cmd.Wait(); err != nil {
			r.err = fmt.Errorf("tool reaper: %w", err)
		}
	})
	return r.err
}
