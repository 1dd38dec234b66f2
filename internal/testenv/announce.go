package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// tell writes the summary line on the go command's stderr, opened through
// /proc. On a terminal or a pipe it is written at once. A regular file
// (go test > log 2>&1) has an offset the go command keeps in its own open
// file: a line appended now would be overwritten by go's next write, so a
// detached shell, which holds the file open, appends it once go has
// exited (or at once when go itself appends, as with >>).
func tell(out *os.File, ppid int, line string) {
	st, err := out.Stat()
	if err != nil || !st.Mode().IsRegular() || appending(ppid) {
		fmt.Fprint(out, line)
		return
	}
	sh := exec.Command("/bin/sh", "-c", `while kill -0 "$1" 2>/dev/null; do sleep 0.1; done; printf '%s' "$2" >&3`,
		"sh", strconv.Itoa(ppid), line)
	sh.ExtraFiles = []*os.File{out}
	sh.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := sh.Start(); err != nil {
		fmt.Fprint(out, line)
		return
	}
	_ = sh.Process.Release()
}

// appending reports whether the go command opened its stderr to append
// (O_APPEND in its flags, octal in /proc's fdinfo).
func appending(ppid int) bool {
	info, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/2", ppid))
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(info), "\n") {
		if v, ok := strings.CutPrefix(l, "flags:"); ok {
			flags, err := strconv.ParseInt(strings.TrimSpace(v), 8, 64)
			return err == nil && flags&syscall.O_APPEND != 0
		}
	}
	return false
}
